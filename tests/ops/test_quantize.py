"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul and QLinearConv
against onnxruntime (the ONNX reference implementation where onnxruntime has no kernel)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model

RNG = np.random.default_rng(5)
ONNX_TYPE = {np.int8: TP.INT8, np.uint8: TP.UINT8, np.int16: TP.INT16, np.uint16: TP.UINT16,
             np.int32: TP.INT32, np.float32: TP.FLOAT, np.float16: TP.FLOAT16}


def init(name: str, value) -> "object":
    return numpy_helper.from_array(np.asarray(value), name)


def values(shape, scale: float = 1.0) -> np.ndarray:
    """Random floats with exact halves (ties of the rounding) and values far out of range."""
    x = RNG.integers(-600, 600, shape).astype(np.float32) / 2 * scale
    x.flat[::7] *= 1000
    return x


def quantize_model(shape, zp_dtype, scale, zp=None, opset=21, **attrs):
    inits = [init("s", scale)] + ([init("z", np.asarray(zp, zp_dtype))] if zp is not None else [])
    node = helper.make_node("QuantizeLinear", ["x", "s"] + (["z"] if zp is not None else []), ["y"], **attrs)
    return make_model([node], [("x", TP.FLOAT, shape)], [("y", ONNX_TYPE[zp_dtype], shape)], inits, opset=opset)


@pytest.mark.parametrize("zp_dtype,zp", [(np.uint8, 128), (np.int8, -3), (np.int16, 1000), (np.uint16, 7)])
def test_quantize_per_tensor(zp_dtype, zp):
    model = quantize_model([3, 4, 5], zp_dtype, np.float32(0.5), zp)
    assert_matches_ort(model, {"x": values([3, 4, 5])})


def test_quantize_default_zero_point_opset10():
    model = quantize_model([2, 6], np.uint8, np.float32(0.25), opset=10)
    assert_matches_ort(model, {"x": values([2, 6])})


def test_quantize_output_dtype_without_zero_point():
    model = quantize_model([2, 6], np.int8, np.float32(0.25), opset=21, output_dtype=TP.INT8)
    assert_matches_ort(model, {"x": values([2, 6])})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_per_axis(axis):
    shape = [3, 4, 5]
    n = shape[axis]
    scale = (RNG.random(n) + 0.1).astype(np.float32)
    zp = RNG.integers(-10, 10, n).astype(np.int8)
    model = quantize_model(shape, np.int8, scale, zp, opset=13, axis=axis)
    assert_matches_ort(model, {"x": values(shape)})


def test_quantize_blocked():
    shape, block = [3, 7, 2], 3
    scale = (RNG.random([3, 3, 2]) + 0.1).astype(np.float32)
    zp = RNG.integers(0, 20, [3, 3, 2]).astype(np.uint8)
    model = quantize_model(shape, np.uint8, scale, zp, opset=21, axis=1, block_size=block)
    x = values(shape)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(actual[0], expected[0])


def test_quantize_runtime_scale_symbolic_dims():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    model = make_model([node], [("x", TP.FLOAT, ["N", 3]), ("s", TP.FLOAT, [3]), ("z", TP.UINT8, [3])],
                       [("y", TP.UINT8, ["N", 3])], opset=13)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (2, 5):
        feeds = {"x": values([n, 3]), "s": np.array([0.5, 1.0, 2.0], np.float32),
                 "z": np.array([0, 100, 255], np.uint8)}
        expected = assert_matches_ort(model, feeds)
        np.testing.assert_array_equal(sess.run(None, feeds)[0], expected[0])


def dequantize_model(x_dtype, shape, scale, zp=None, opset=21, scale_type=TP.FLOAT, **attrs):
    inits = [init("s", scale)] + ([init("z", np.asarray(zp, x_dtype))] if zp is not None else [])
    node = helper.make_node("DequantizeLinear", ["x", "s"] + (["z"] if zp is not None else []), ["y"], **attrs)
    return make_model([node], [("x", ONNX_TYPE[x_dtype], shape)], [("y", scale_type, shape)], inits, opset=opset)


@pytest.mark.parametrize("x_dtype,zp", [(np.uint8, 128), (np.int8, -5), (np.int16, -300), (np.uint16, 9),
                                        (np.int32, None)])
def test_dequantize_per_tensor(x_dtype, zp):
    info = np.iinfo(x_dtype)
    x = RNG.integers(max(info.min, -100000), min(info.max, 100000), [3, 5]).astype(x_dtype)
    model = dequantize_model(x_dtype, [3, 5], np.float32(0.125), zp, opset=13 if x_dtype in (np.uint8, np.int8, np.int32) else 21)
    assert_matches_ort(model, {"x": x})


def test_dequantize_per_axis_float16_scale():
    scale = (RNG.random(4) + 0.5).astype(np.float16)
    zp = RNG.integers(0, 50, 4).astype(np.uint8)
    model = dequantize_model(np.uint8, [2, 4, 3], scale, zp, opset=19, scale_type=TP.FLOAT16, axis=1)
    assert_matches_ort(model, {"x": RNG.integers(0, 255, [2, 4, 3]).astype(np.uint8)}, rtol=1e-3)


def test_dequantize_blocked_symbolic():
    scale = (RNG.random([2, 3]) + 0.5).astype(np.float32)
    zp = RNG.integers(-5, 5, [2, 3]).astype(np.int8)
    inits = [init("s", scale), init("z", zp)]
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    model = make_model([node], [("x", TP.INT8, [2, "C"])], [("y", TP.FLOAT, [2, "C"])], inits, opset=21)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for c in (5, 6):
        x = RNG.integers(-128, 127, [2, c]).astype(np.int8)
        expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-6)
    with pytest.raises(Exception):
        sess.run(None, {"x": np.zeros([2, 7], np.int8)})


def test_dynamic_quantize_linear():
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    model = make_model([node], [("x", TP.FLOAT, ["N", 4])],
                       [("y", TP.UINT8, ["N", 4]), ("s", TP.FLOAT, []), ("z", TP.UINT8, [])], opset=11)
    for n in (3, 6):
        assert_matches_ort(model, {"x": RNG.standard_normal([n, 4]).astype(np.float32) * 3 + 1})
    # onnxruntime (unlike the reference) uses scale 1 for an all-zero x
    assert_matches_ort(model, {"x": np.zeros([2, 4], np.float32)})


@pytest.mark.parametrize("lowest_in", ["first half", "second half", "tail"])
def test_dynamic_quantize_linear_on_threads(lowest_in):
    """Above the loop threshold (64K elements) both passes run on 2 threads, each thread's part
    with its own range: the range, the scale and every element are those of onnxruntime and of
    a 1-thread build, wherever the extremes lie (NaNs never move the range)."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    model = make_model([node], [("x", TP.FLOAT, ["N", 1023])],
                       [("y", TP.UINT8, ["N", 1023]), ("s", TP.FLOAT, []), ("z", TP.UINT8, [])], opset=11)
    x = RNG.standard_normal([77, 1023]).astype(np.float32)
    at = {"first half": 5, "second half": 77 * 1023 - 5000, "tail": 77 * 1023 - 3}[lowest_in]
    x.flat[at] = -9.5
    x.flat[77 * 1023 - 1 - at] = 7.25
    x.flat[100] = np.nan
    runs = []
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        runs.append(onnxc.InferenceSession(model.SerializeToString(), so).run(None, {"x": x}))
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two)
    assert runs[1][1] == np.float32((7.25 + 9.5) / 255.0)
    assert_matches_ort(model, {"x": np.nan_to_num(x)})


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("a_type,y_type", [(np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("a_shape,b_shape", [([3, 5], [5, 4]), (["B", 2, 6], [6, 3])])
def test_qlinear_matmul(opset, a_type, y_type, a_shape, b_shape):
    b_type = np.int8
    inits = [init("as", np.float32(0.05)), init("az", np.asarray(3, a_type)),
             init("bs", np.float32(0.02)), init("bz", np.asarray(-2, b_type)),
             init("ys", np.float32(0.01)), init("yz", np.asarray(5, y_type))]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    model = make_model([node], [("a", ONNX_TYPE[a_type], a_shape), ("b", TP.INT8, b_shape)],
                       [("y", ONNX_TYPE[y_type], a_shape[:-1] + b_shape[-1:])], inits, opset=opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    # its own generator (the draws do not depend on which tests ran before), and B within
    # +-40: onnxruntime's u8s8 kernels saturate 16-bit partial sums of large operands
    rng = np.random.default_rng(11)
    for batch in (1, 3):
        shape = [batch if d == "B" else d for d in a_shape]
        info = np.iinfo(a_type)
        feeds = {"a": rng.integers(info.min, info.max, shape).astype(a_type),
                 "b": rng.integers(-40, 40, b_shape).astype(np.int8)}
        expected = assert_matches_ort(model, feeds)
        np.testing.assert_array_equal(sess.run(None, feeds)[0], expected[0])


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("group,pads,bias", [(1, [0, 0, 0, 0], False), (1, [1, 1, 1, 1], True), (2, [1, 0, 1, 0], True)])
def test_qlinear_conv(per_channel, group, pads, bias):
    m, c = 4, 4
    # small weights: onnxruntime's u8s8 kernels saturate 16-bit partial sums of large ones
    w = RNG.integers(-40, 40, [m, c // group, 3, 3]).astype(np.int8)
    w_scale = (RNG.random(m) * 0.05 + 0.01).astype(np.float32) if per_channel else np.float32(0.03)
    w_zero = np.zeros(m, np.int8) if per_channel else np.int8(0)
    inits = [init("xs", np.float32(0.02)), init("xz", np.uint8(120)), init("w", w), init("ws", w_scale),
             init("wz", w_zero), init("ys", np.float32(0.5)), init("yz", np.uint8(100))]
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(init("B", RNG.integers(-500, 500, m).astype(np.int32)))
        inputs.append("B")
    node = helper.make_node("QLinearConv", inputs, ["y"], group=group, pads=pads)
    model = make_model([node], [("x", TP.UINT8, ["N", c, 6, 5])], [("y", TP.UINT8, ["N", m, None, None])], inits, opset=10)
    for n in (1, 2):
        assert_matches_ort(model, {"x": RNG.integers(0, 255, [n, c, 6, 5]).astype(np.uint8)})


def assert_matches_reference(model, feeds):
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a.astype(np.float64), e.astype(np.float64))


@pytest.mark.parametrize("out_type", [TP.INT4, TP.UINT4, TP.INT2, TP.UINT2, TP.FLOAT8E4M3FN,
                                      TP.FLOAT8E5M2FNUZ, TP.FLOAT4E2M1])
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_narrow_types(out_type, saturate):
    if out_type == TP.FLOAT4E2M1 and not saturate:
        pytest.skip("float4e2m1 has no infinity: saturate does not apply")
    scale = (RNG.random(4) + 0.5).astype(np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, output_dtype=out_type, saturate=saturate)
    model = make_model([node], [("x", TP.FLOAT, [2, 4, 3])], [("y", out_type, [2, 4, 3])], [init("s", scale)],
                       opset=25)
    x = values([2, 4, 3], 0.01)
    x.flat[::5] *= 1e5
    assert_matches_reference(model, {"x": x})


@pytest.mark.parametrize("x_type", [TP.INT4, TP.UINT4, TP.INT2, TP.FLOAT8E4M3FN, TP.FLOAT8E5M2, TP.FLOAT4E2M1])
def test_dequantize_narrow_types(x_type):
    from onnx.helper import tensor_dtype_to_np_dtype
    np_type = tensor_dtype_to_np_dtype(x_type)
    x = RNG.standard_normal([3, 4]).astype(np.float32) * 3
    x = x.astype(np_type) if x_type not in (TP.INT4, TP.UINT4, TP.INT2) else \
        np.clip(np.rint(x), -2 if x_type == TP.INT2 else -8, 1 if x_type == TP.INT2 else 7).astype(np_type)
    inits = [init("s", np.float32(0.5))]
    inputs = ["x", "s"]
    if x_type in (TP.INT4, TP.UINT4, TP.INT2):
        inits.append(init("z", np.asarray(1, np_type)))
        inputs.append("z")
    node = helper.make_node("DequantizeLinear", inputs, ["y"])
    model = make_model([node], [("x", x_type, [3, 4])], [("y", TP.FLOAT, [3, 4])], inits, opset=25)
    assert_matches_reference(model, {"x": x})


@pytest.mark.parametrize("opset", [10, 13, 17])
def test_qdq_weights_fold_at_older_opsets(opset):
    """A QDQ model as quantizers write it: int8 weights behind a DequantizeLinear, which
    constant folding evaluates (onnx's reference implementation starts at version 19)."""
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, size=(4, 3, 3, 3), dtype=np.int8)
    inits = [numpy_helper.from_array(w, "wq"), numpy_helper.from_array(np.array(0.02, np.float32), "ws"),
             numpy_helper.from_array(np.array(0, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
             numpy_helper.from_array(np.array(3, np.int8), "xz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["y"], pads=[1, 1, 1, 1])]
    model = make_model(nodes, [("x", TP.FLOAT, [1, 3, 6, 6])], [("y", TP.FLOAT, [1, 4, 6, 6])], inits, opset=opset)
    assert_matches_ort(model, {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)})
