"""GridSample and AffineGrid against onnxruntime (the ONNX reference where it has no kernel)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def grid_sample(x_shape, grid_shape, opset=20, elem=F, **attrs):
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], **attrs)
    out = list(x_shape[:2]) + list(grid_shape[1:-1])
    return make_model([node], [("X", elem, x_shape), ("grid", elem, grid_shape)], [("Y", elem, out)], opset=opset)


def feeds(x_shape, grid_shape, dtype=np.float32):
    # a margin outside [-1, 1] exercises the padding modes
    return {"X": rng.standard_normal(x_shape).astype(dtype),
            "grid": rng.uniform(-1.3, 1.3, grid_shape).astype(dtype)}


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_2d(mode, padding_mode, align_corners):
    m = grid_sample([2, 3, 5, 4], [2, 6, 7, 2], mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert_matches_ort(m, feeds([2, 3, 5, 4], [2, 6, 7, 2]))


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_3d(mode, padding_mode):
    m = grid_sample([1, 2, 3, 4, 5], [1, 2, 3, 4, 3], mode=mode, padding_mode=padding_mode)
    f = feeds([1, 2, 3, 4, 5], [1, 2, 3, 4, 3])
    expected = ReferenceEvaluator(m).run(None, f)[0]
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, f)[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_opset16_names(mode):
    m = grid_sample([1, 2, 4, 4], [1, 3, 3, 2], opset=16, mode=mode)
    assert_matches_ort(m, feeds([1, 2, 4, 4], [1, 3, 3, 2]))


def test_double_and_int_nearest():
    m = grid_sample([1, 2, 4, 4], [1, 3, 3, 2], elem=TensorProto.DOUBLE, mode="cubic", padding_mode="border")
    assert_matches_ort(m, feeds([1, 2, 4, 4], [1, 3, 3, 2], np.float64), rtol=1e-10, atol=1e-10)
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode="nearest")
    m = make_model([node], [("X", TensorProto.INT32, [1, 1, 3, 3]), ("grid", F, [1, 2, 2, 2])],
                   [("Y", TensorProto.INT32, [1, 1, 2, 2])], opset=20)
    x = np.arange(9, dtype=np.int32).reshape(1, 1, 3, 3)
    g = np.array([[[[-1, -1], [1, 1]], [[0, 0], [1.5, 0]]]], np.float32)
    y = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x, "grid": g})[0]
    np.testing.assert_array_equal(y, ReferenceEvaluator(m).run(None, {"X": x, "grid": g})[0])


def test_symbolic():
    m = grid_sample(["N", 2, "H", "W"], ["N", "h", "w", 2])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n, h, w in ((1, 4, 5), (2, 3, 3)):
        f = feeds([n, 2, h, w], [n, 2, 3, 2])
        expected = ReferenceEvaluator(m).run(None, f)[0]
        np.testing.assert_allclose(sess.run(None, f)[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("const_size", [True, False])
def test_affine_grid(dims, align_corners, const_size):
    size = [2, 3, 4, 5] if dims == 2 else [2, 3, 2, 4, 5]
    theta_shape = [2, dims, dims + 1]
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align_corners)
    inputs = [("theta", F, theta_shape)]
    inits = []
    if const_size:
        inits.append(numpy_helper.from_array(np.array(size, np.int64), "size"))
    else:
        inputs.append(("size", TensorProto.INT64, [len(size)]))
    m = make_model([node], inputs, [("grid", F, [None] * (dims + 2))], inits, opset=20)
    f = {"theta": rng.standard_normal(theta_shape).astype(np.float32)}
    if not const_size:
        f["size"] = np.array(size, np.int64)
    expected = ReferenceEvaluator(m).run(None, f)[0]
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, f)[0]
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_affine_grid_symbolic_batch():
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"])
    m = make_model([node], [("theta", F, ["N", 2, 3])], [("grid", F, ["N", 3, 4, 2])],
                   [numpy_helper.from_array(np.array([2, 1, 3, 4], np.int64), "size")], opset=20)
    sess = onnxc.InferenceSession(m.SerializeToString())
    theta = rng.standard_normal((2, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"theta": theta})[0],
                               ReferenceEvaluator(m).run(None, {"theta": theta})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="batch size"):
        sess.run(None, {"theta": theta[:1]})
