"""SwiGLU (opset 28) against the ONNX reference implementation."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import make_model

rng = np.random.default_rng(0)


def swiglu(shape, elem=TensorProto.FLOAT, **attrs):
    node = helper.make_node("SwiGLU", ["A", "B"], ["Y"], **attrs)
    return make_model([node], [("A", elem, shape), ("B", elem, shape)], [("Y", elem, shape)], opset=28)


@pytest.mark.parametrize("dtype,elem,tol", [(np.float32, TensorProto.FLOAT, 1e-6),
                                            (np.float64, TensorProto.DOUBLE, 1e-12),
                                            (np.float16, TensorProto.FLOAT16, 1e-3)])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu(dtype, elem, tol, alpha):
    m = swiglu([3, 5], elem, alpha=alpha)
    f = {"A": rng.standard_normal((3, 5)).astype(dtype), "B": rng.standard_normal((3, 5)).astype(dtype)}
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, f)[0]
    expected = ReferenceEvaluator(m).run(None, f)[0]
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol)


def test_symbolic():
    m = swiglu(["N", 4])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 6):
        f = {"A": rng.standard_normal((n, 4)).astype(np.float32), "B": rng.standard_normal((n, 4)).astype(np.float32)}
        np.testing.assert_allclose(sess.run(None, f)[0], ReferenceEvaluator(m).run(None, f)[0], rtol=1e-6, atol=1e-6)
