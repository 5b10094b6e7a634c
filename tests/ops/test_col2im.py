"""Col2Im against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

rng = np.random.default_rng(0)


def col2im(x_shape, image, block, elem=TensorProto.FLOAT, const=True, **attrs):
    node = helper.make_node("Col2Im", ["input", "image_shape", "block_shape"], ["output"], **attrs)
    inputs = [("input", elem, x_shape)]
    inits = []
    for name, value in (("image_shape", image), ("block_shape", block)):
        if const:
            inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
        else:
            inputs.append((name, TensorProto.INT64, [len(value)]))
    return make_model([node], inputs, [("output", elem, [None] * (2 + len(image)))], inits, opset=18)


@pytest.mark.parametrize("const", [True, False])
@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1]}, {"pads": [1, 0, 1, 2]}, {"dilations": [2, 1]},
                                   {"strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 2]}])
def test_2d(const, attrs):
    image, block = [5, 6], [2, 3]
    strides, pads, dil = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
    windows = [(image[i] + pads[i] + pads[i + 2] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(2)]
    shape = [2, 3 * 6, windows[0] * windows[1]]
    m = col2im(shape, image, block, const=const, **attrs)
    feeds = {"input": rng.standard_normal(shape).astype(np.float32)}
    if not const:
        feeds.update(image_shape=np.array(image, np.int64), block_shape=np.array(block, np.int64))
    assert_matches_ort(m, feeds)


def test_3d_and_int():
    m = col2im([1, 2 * 8, 8], [3, 3, 3], [2, 2, 2], elem=TensorProto.INT32)
    x = rng.integers(-50, 50, size=(1, 16, 8)).astype(np.int32)
    try:
        expected = run_ort(m, {"input": x})[0]
    except Exception:
        m = col2im([1, 2 * 8, 8], [3, 3, 3], [2, 2, 2])
        assert_matches_ort(m, {"input": x.astype(np.float32)})
        return
    np.testing.assert_array_equal(onnxc.InferenceSession(m.SerializeToString()).run(None, {"input": x})[0], expected)


def test_symbolic_batch():
    m = col2im(["N", 4, 9], [4, 4], [2, 2])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 3):
        x = rng.standard_normal((n, 4, 9)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"input": x})[0], run_ort(m, {"input": x})[0], rtol=1e-6)


def test_bad_block_count_fails():
    m = col2im([1, 4, 8], [4, 4], [2, 2], const=False)
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="sliding windows"):
        sess.run(None, {"input": np.zeros((1, 4, 8), np.float32), "image_shape": np.array([4, 4], np.int64),
                        "block_shape": np.array([2, 2], np.int64)})
