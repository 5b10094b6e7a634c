"""onnxruntime's com.microsoft quantization contrib ops against onnxruntime: integer outputs
exactly, float outputs within the tolerance each test states."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import assert_matches_ort, make_model, run_onnxc, run_ort

MS = "com.microsoft"
RNG = np.random.default_rng(11)
ONNX_TYPE = {np.int8: TP.INT8, np.uint8: TP.UINT8, np.int16: TP.INT16, np.uint16: TP.UINT16,
             np.int32: TP.INT32, np.float32: TP.FLOAT}
RANGE = {np.int8: (-128, 127), np.uint8: (0, 255)}


def init(name: str, value) -> object:
    return numpy_helper.from_array(np.asarray(value), name)


def ms_model(nodes, inputs, outputs, inits=(), opset=17):
    return make_model(nodes, inputs, outputs, inits, opset=opset, extra_opsets={MS: 1})


def every_value(t, shape) -> np.ndarray:
    """Every value of type t, repeated and shuffled, then random ones to fill ``shape``."""
    lo, hi = RANGE[t]
    n = int(np.prod(shape))
    x = np.concatenate([np.arange(lo, hi + 1), RNG.integers(lo, hi + 1, max(0, n - (hi - lo + 1)))])[:n]
    return RNG.permutation(x).astype(t).reshape(shape)


def qparams(t, names, seed):
    """One float32 scale and one zero point of type t per name, as initializers."""
    rng = np.random.default_rng(seed)
    lo, hi = RANGE[t]
    out = []
    for n in names:
        out += [init(f"{n}_s", np.float32(rng.uniform(0.002, 0.2))), init(f"{n}_z", t(rng.integers(lo, hi + 1)))]
    return out


# --- QLinearAdd, QLinearMul ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("seed", range(4))
def test_qlinear_binary_every_pair(op, t, seed):
    """All 65536 pairs of values, random scales and zero points."""
    lo, hi = RANGE[t]
    a = np.repeat(np.arange(lo, hi + 1), 256).astype(t).reshape(256, 256)
    b = np.tile(np.arange(lo, hi + 1), 256).astype(t).reshape(256, 256)
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["c"], domain=MS)
    model = ms_model([node], [("a", ONNX_TYPE[t], [256, 256]), ("b", ONNX_TYPE[t], [256, 256])],
                     [("c", ONNX_TYPE[t], [256, 256])], qparams(t, "abc", seed))
    assert_matches_ort(model, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("a_shape,b_shape", [([4, 3, 40], [40]), ([4, 3, 40], [3, 1]), ([1], [5, 40]),
                                             ([5, 40], []), ([2, 1, 40], [1, 3, 40])])
def test_qlinear_binary_broadcast(op, a_shape, b_shape):
    t = np.uint8
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["c"], domain=MS)
    out = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    model = ms_model([node], [("a", TP.UINT8, a_shape), ("b", TP.UINT8, b_shape)], [("c", TP.UINT8, out)],
                     qparams(t, "abc", 3))
    for _ in range(3):
        assert_matches_ort(model, {"a": RNG.integers(0, 256, a_shape).astype(t),
                                   "b": RNG.integers(0, 256, b_shape).astype(t)})


def test_qlinear_add_symbolic_dim():
    node = helper.make_node("QLinearAdd", ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["c"], domain=MS)
    model = ms_model([node], [("a", TP.INT8, ["n", 16]), ("b", TP.INT8, ["n", 16])], [("c", TP.INT8, ["n", 16])],
                     qparams(np.int8, "abc", 9))
    assert_matches_ort(model, {"a": every_value(np.int8, [20, 16]), "b": every_value(np.int8, [20, 16])})


def test_qlinear_add_unknown_attribute_is_refused():
    import onnxc
    node = helper.make_node("QLinearAdd", ["a", "s", "", "a", "s", "", "s", ""], ["c"], domain=MS, fused=1)
    model = ms_model([node], [("a", TP.UINT8, [4])], [("c", TP.UINT8, [4])], [init("s", np.float32(0.1))])
    with pytest.raises(Exception, match="unknown attribute 'fused'"):
        onnxc.InferenceSession(model.SerializeToString())


# --- QLinearSigmoid, QLinearLeakyRelu ----------------------------------------------------------

@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.3})])
@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("seed", range(4))
def test_qlinear_table_ops(op, attrs, t, seed):
    """Every input value, so every table entry is compared."""
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, **attrs)
    inits = qparams(t, "xy", seed)
    if op == "QLinearSigmoid":   # outputs in [0, 1]: a scale that spreads them over the range
        inits[2] = init("y_s", np.float32(np.random.default_rng(seed).uniform(1 / 300, 1 / 100)))
    model = ms_model([node], [("x", ONNX_TYPE[t], [2, "n"])], [("y", ONNX_TYPE[t], [2, "n"])], inits)
    assert_matches_ort(model, {"x": every_value(t, [2, 300])})


def test_qlinear_sigmoid_without_zero_points():
    node = helper.make_node("QLinearSigmoid", ["x", "x_s", "", "y_s", ""], ["y"], domain=MS)
    inits = [init("x_s", np.float32(0.05)), init("y_s", np.float32(1 / 255))]
    model = ms_model([node], [("x", TP.INT8, [256])], [("y", TP.INT8, [256])], inits)
    assert_matches_ort(model, {"x": every_value(np.int8, [256])})


# --- QuantizeLinear, DequantizeLinear (com.microsoft) -------------------------------------------

Q_TYPES = [(np.uint8, TP.UINT8), (np.int8, TP.INT8), (np.uint16, TP.UINT16), (np.int16, TP.INT16)]


@pytest.mark.parametrize("t,tp", Q_TYPES)
def test_ms_quantize_dequantize_per_tensor(t, tp):
    zp = np.asarray(7 if t in (np.uint8, np.uint16) else -3, t)
    scale = np.float32(0.05 if t in (np.uint8, np.int8) else 0.0007)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS)
    model = ms_model([q, dq], [("x", TP.FLOAT, [3, "n"])], [("q", tp, [3, "n"]), ("y", TP.FLOAT, [3, "n"])],
                     [init("s", scale), init("z", zp)])
    x = (RNG.integers(-4000, 4000, [3, 50]) / 2 * scale).astype(np.float32)   # exact halves: ties
    x.flat[::9] *= 300                                                         # saturation
    assert_matches_ort(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_ms_quantize_dequantize_per_axis(axis):
    shape = [3, 4, 5]
    n = shape[axis]
    scale = RNG.uniform(0.01, 0.1, n).astype(np.float32)
    zp = RNG.integers(-10, 10, n).astype(np.int8)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS, axis=axis)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS, axis=axis)
    model = ms_model([q, dq], [("x", TP.FLOAT, shape)], [("q", TP.INT8, shape), ("y", TP.FLOAT, shape)],
                     [init("s", scale), init("z", zp)])
    assert_matches_ort(model, {"x": RNG.normal(0, 3, shape).astype(np.float32)}, rtol=0, atol=0)


def test_ms_dequantize_int32_without_zero_point():
    dq = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], domain=MS)
    model = ms_model([dq], [("x", TP.INT32, [6])], [("y", TP.FLOAT, [6])], [init("s", np.float32(0.125))])
    assert_matches_ort(model, {"x": np.array([-(2 ** 31), -5, 0, 3, 2 ** 20 + 1, 2 ** 31 - 1], np.int32)}, rtol=0, atol=0)


# --- MatMulIntegerToFloat, DynamicQuantizeMatMul -----------------------------------------------

def weights(t, shape) -> np.ndarray:
    """int8 weights in [-64, 63] (7 bits, as quantize_dynamic's reduce_range makes them):
    onnxruntime's AVX2 kernel for uint8 x int8 saturates each sum of two products to int16,
    which 8-bit weights can pass; onnxc computes the exact sums."""
    lo, hi = (-64, 63) if t is np.int8 else RANGE[t]
    return RNG.integers(lo, hi, shape, endpoint=True).astype(t)


@pytest.mark.parametrize("a_t,b_t", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_integer_to_float(a_t, b_t, per_column, bias):
    """Exact: onnxruntime accumulates in int32 and scales each sum in float32 the same way."""
    n = 12
    shape = [n] if per_column else []
    inits = [init("b", weights(b_t, [20, n])),
             init("a_s", np.float32(0.031)), init("b_s", RNG.uniform(0.001, 0.05, shape).astype(np.float32)),
             init("a_z", a_t(RNG.integers(*RANGE[a_t]))),
             init("b_z", weights(b_t, shape))]
    names = ["a", "b", "a_s", "b_s", "a_z", "b_z"]
    if bias:
        inits.append(init("bias", RNG.normal(0, 1, n).astype(np.float32)))
        names.append("bias")
    node = helper.make_node("MatMulIntegerToFloat", names, ["y"], domain=MS)
    model = ms_model([node], [("a", ONNX_TYPE[a_t], ["batch", 3, 20])], [("y", TP.FLOAT, ["batch", 3, n])], inits)
    assert_matches_ort(model, {"a": RNG.integers(*RANGE[a_t], [2, 3, 20], endpoint=True).astype(a_t)},
                       rtol=0, atol=0)


@pytest.mark.parametrize("b_t", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column,zero_point,bias", [(False, False, False), (True, True, True),
                                                         (False, True, True)])
def test_dynamic_quantize_matmul(b_t, per_column, zero_point, bias):
    n = 10
    shape = [n] if per_column else []
    inits = [init("b", weights(b_t, [24, n])),
             init("b_s", RNG.uniform(0.001, 0.05, shape).astype(np.float32))]
    names = ["a", "b", "b_s", "", ""]
    if zero_point:
        inits.append(init("b_z", weights(b_t, shape)))
        names[3] = "b_z"
    if bias:
        inits.append(init("bias", RNG.normal(0, 1, n).astype(np.float32)))
        names[4] = "bias"
    node = helper.make_node("DynamicQuantizeMatMul", names, ["y"], domain=MS)
    model = ms_model([node], [("a", TP.FLOAT, ["m", 24])], [("y", TP.FLOAT, ["m", n])], inits)
    for a in (RNG.normal(0, 2, [5, 24]), RNG.uniform(0.5, 3, [1, 24]), np.zeros([2, 24])):
        assert_matches_ort(model, {"a": a.astype(np.float32)}, rtol=0, atol=0)


# --- MatMulNBits ---------------------------------------------------------------------------------

def nbits_weights(n, k, block, bits=4, zero_points="packed", seed=0):
    """Random quantized weights in MatMulNBits' layout, and their float32 values [K, N]."""
    rng = np.random.default_rng(seed)
    blocks = -(-k // block)
    q = rng.integers(0, 1 << bits, [n, blocks * block])
    scales = rng.uniform(0.01, 0.1, [n, blocks]).astype(np.float32)
    per_byte = 8 // bits
    packed = np.zeros([n, blocks * block // per_byte], np.uint8)
    for j in range(per_byte):
        packed |= (q[:, j::per_byte] << (bits * j)).astype(np.uint8)
    inits = [init("b", packed.reshape(n, blocks, block * bits // 8)), init("s", scales.reshape(-1))]
    if zero_points == "packed":
        zq = rng.integers(0, 1 << bits, [n, -(-blocks // per_byte) * per_byte])
        zp = np.zeros([n, zq.shape[1] // per_byte], np.uint8)
        for j in range(per_byte):
            zp |= (zq[:, j::per_byte] << (bits * j)).astype(np.uint8)
        inits.append(init("z", zp.reshape(-1)))
        zero = zq[:, :blocks].astype(np.float32)
    elif zero_points == "float":
        zero = rng.uniform(0, (1 << bits) - 1, [n, blocks]).astype(np.float32)
        inits.append(init("z", zero.reshape(-1)))
    else:
        zero = np.full([n, blocks], 1 << (bits - 1), np.float32)
    w = (q - np.repeat(zero, block, axis=1)) * np.repeat(scales, block, axis=1)
    return inits, w[:, :k].T.astype(np.float32)


@pytest.mark.parametrize("k,block", [(64, 32), (80, 16), (128, 128)])
@pytest.mark.parametrize("bits,zero_points", [(4, "packed"), (4, "none"), (4, "float"), (8, "packed"), (8, "none")])
def test_matmul_nbits(k, block, zero_points, bits):
    """float32 sums in another order than onnxruntime's: within 1e-5 of the largest output."""
    n = 24
    inits, w = nbits_weights(n, k, block, bits, zero_points)
    names = ["a", "b", "s"] + (["z"] if zero_points != "none" else [])
    node = helper.make_node("MatMulNBits", names, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block)
    model = ms_model([node], [("a", TP.FLOAT, ["batch", 3, k])], [("y", TP.FLOAT, ["batch", 3, n])], inits)
    a = RNG.normal(0, 1, [2, 3, k]).astype(np.float32)
    out = assert_matches_ort(model, {"a": a}, rtol=0, atol=1e-5 * float(np.abs(a @ w).max()))
    np.testing.assert_allclose(out[0], a @ w, rtol=0, atol=1e-5 * float(np.abs(a @ w).max()))


@pytest.mark.parametrize("accuracy_level", [0, 4])
def test_matmul_nbits_bias_and_accuracy_level(accuracy_level):
    """onnxc computes in float32 at every accuracy_level; onnxruntime's level 4 quantizes A to
    int8 per block (a relative error near 1/254 of each block's largest |a| per product), so
    that case is compared within 2% of the largest output."""
    n, k, block = 16, 96, 32
    inits, w = nbits_weights(n, k, block, 4, "packed", seed=3)
    bias = RNG.normal(0, 1, n).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["a", "b", "s", "z", "", "bias"], ["y"], domain=MS, K=k, N=n, bits=4,
                            block_size=block, accuracy_level=accuracy_level)
    model = ms_model([node], [("a", TP.FLOAT, [5, k])], [("y", TP.FLOAT, [5, n])], inits + [init("bias", bias)])
    a = RNG.normal(0, 1, [5, k]).astype(np.float32)
    ref = a @ w + bias
    tol = (1e-5 if accuracy_level == 0 else 2e-2) * float(np.abs(ref).max())
    out = assert_matches_ort(model, {"a": a}, rtol=0, atol=tol)
    np.testing.assert_allclose(out[0], ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))


# --- GatherBlockQuantized ------------------------------------------------------------------------

def int4_tensor(name, values, tp):
    return helper.make_tensor(name, tp, list(values.shape), values.astype(np.int8).reshape(-1).tolist())


@pytest.mark.parametrize("data_type,gather_axis", [("uint8", 0), ("int4", 0), ("int4", 1), ("uint4", 0), ("uint4", 1)])
@pytest.mark.parametrize("zero_points", [True, False])
def test_gather_block_quantized(data_type, zero_points, gather_axis):
    """Exact: (q - zero_point) * scale is one float32 product in both."""
    rng = np.random.default_rng(4)
    vocab, d, block = 10, 64, 16
    shape = [vocab, 3, d] if gather_axis == 1 else [vocab, d]
    lead = shape[:-1]
    scales = init("s", rng.uniform(0.01, 0.1, lead + [d // block]).astype(np.float32))
    if data_type == "uint8":
        q = rng.integers(0, 16, shape)
        data = init("d", (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8))
        zq = rng.integers(0, 16, lead + [d // block])
        zp = init("z", (zq[..., 0::2] | (zq[..., 1::2] << 4)).astype(np.uint8))
    else:
        lo, hi, tp = (-8, 7, TP.INT4) if data_type == "int4" else (0, 15, TP.UINT4)
        data = int4_tensor("d", rng.integers(lo, hi, shape, endpoint=True), tp)
        zp = int4_tensor("z", rng.integers(lo, hi, lead + [d // block], endpoint=True), tp)
    names = ["d", "i", "s"] + (["z"] if zero_points else [])
    node = helper.make_node("GatherBlockQuantized", names, ["y"], domain=MS, block_size=block,
                            gather_axis=gather_axis, quantize_axis=len(shape) - 1)
    axis_len = shape[gather_axis]
    out = shape[:gather_axis] + [2, 2] + shape[gather_axis + 1:]
    model = ms_model([node], [("i", TP.INT64, [2, 2])], [("y", TP.FLOAT, out)],
                     [data, scales] + ([zp] if zero_points else []))
    assert_matches_ort(model, {"i": np.array([[0, axis_len - 1], [1, -1]], np.int64)}, rtol=0, atol=0)


# --- QLinearConcat -------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_qlinear_concat(t, axis):
    """Every value through each input's table; one input shares Y's parameters (a plain copy)."""
    shapes = [[4, 64, 2], [4, 64, 2], [4, 64, 2]]
    shapes[1][axis] = 3 if axis else 2
    names, inputs, inits = ["y_s", "y_z"], [], qparams(t, "y", 7)
    for i, shape in enumerate(shapes):
        inputs.append((f"x{i}", ONNX_TYPE[t], shape))
        if i == 2:
            names += [f"x{i}", "y_s", "y_z"]
        else:
            inits += qparams(t, [f"x{i}"], 20 + i)
            names += [f"x{i}", f"x{i}_s", f"x{i}_z"]
    out = list(np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape)
    node = helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=axis)
    model = ms_model([node], inputs, [("y", ONNX_TYPE[t], out)], inits)
    assert_matches_ort(model, {f"x{i}": every_value(t, s) for i, s in enumerate(shapes)})


def test_qlinear_concat_symbolic_axis():
    t = np.uint8
    names = ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z"]
    node = helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=1)
    model = ms_model([node], [("a", TP.UINT8, [2, "n"]), ("b", TP.UINT8, [2, "m"])], [("y", TP.UINT8, [2, None])],
                     qparams(t, ["y", "a", "b"], 5))
    assert_matches_ort(model, {"a": every_value(t, [2, 130]), "b": every_value(t, [2, 200])})


# --- QLinearGlobalAveragePool ----------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("spatial", [[7, 5], [1, 1], [16]])
def test_qlinear_global_average_pool(t, channels_last, spatial):
    c = 6
    shape = [2, *spatial, c] if channels_last else [2, c, *spatial]
    ones = [1] * len(spatial)
    out = [2, *ones, c] if channels_last else [2, c, *ones]
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS,
                            channels_last=channels_last)
    model = ms_model([node], [("x", ONNX_TYPE[t], shape)], [("y", ONNX_TYPE[t], out)], qparams(t, "xy", 2))
    for _ in range(3):
        assert_matches_ort(model, {"x": RNG.integers(*RANGE[t], shape, endpoint=True).astype(t)})


# --- QLinearSoftmax -------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("opset,axis,shape", [(13, -1, [4, 37]), (13, 1, [3, 9, 5]), (12, 1, [3, 4, 6]),
                                              (13, -1, [2, 3])])
def test_qlinear_softmax(t, opset, axis, shape):
    lo, _ = RANGE[t]
    inits = [init("x_s", np.float32(0.07)), init("x_z", t(0)), init("y_s", np.float32(1 / 256)), init("y_z", t(lo))]
    node = helper.make_node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, opset=opset,
                            axis=axis)
    model = ms_model([node], [("x", ONNX_TYPE[t], shape)], [("y", ONNX_TYPE[t], shape)], inits)
    for _ in range(4):
        assert_matches_ort(model, {"x": RNG.integers(*RANGE[t], shape, endpoint=True).astype(t)})


# --- QLinearAveragePool ---------------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]),
                                   dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
                                   dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
                                   dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER")])
def test_qlinear_average_pool(t, attrs):
    shape = [2, 3, 7, 6]
    node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, **attrs)
    model = ms_model([node], [("x", ONNX_TYPE[t], shape)], [("y", ONNX_TYPE[t], [2, 3, None, None])], qparams(t, "xy", 6))
    for _ in range(3):
        assert_matches_ort(model, {"x": RNG.integers(*RANGE[t], shape, endpoint=True).astype(t)})


# --- DynamicQuantizeLSTM ---------------------------------------------------------------------------

def quantized_lstm_model(direction, w_t, per_row, peepholes=False, states=True, **attrs):
    """A DynamicQuantizeLSTM node with random weights: hidden 8, input 6, batch 3, 7 steps."""
    rng = np.random.default_rng(8)
    hidden, inp, batch, seq = 8, 6, 3, 7
    dirs = 2 if direction == "bidirectional" else 1
    scale_shape = [dirs, 4 * hidden] if per_row else [dirs]
    lo, hi = (-64, 63) if w_t is np.int8 else (0, 255)   # 7-bit int8 weights: see weights()
    inits = [init("W", rng.integers(lo, hi, [dirs, inp, 4 * hidden], endpoint=True).astype(w_t)),
             init("R", rng.integers(lo, hi, [dirs, hidden, 4 * hidden], endpoint=True).astype(w_t)),
             init("B", rng.normal(0, 0.5, [dirs, 8 * hidden]).astype(np.float32)),
             init("W_s", rng.uniform(0.002, 0.01, scale_shape).astype(np.float32)),
             init("R_s", rng.uniform(0.002, 0.01, scale_shape).astype(np.float32))]
    zero = (lambda s: np.zeros(s, w_t)) if w_t is np.int8 else (lambda s: rng.integers(100, 156, s).astype(w_t))
    inits += [init("W_z", zero(scale_shape)), init("R_z", zero(scale_shape))]
    names = ["x", "W", "R", "B", "", "", "", "", "W_s", "W_z", "R_s", "R_z"]
    if states:
        inits += [init("h0", rng.normal(0, 0.5, [dirs, batch, hidden]).astype(np.float32)),
                  init("c0", rng.normal(0, 0.5, [dirs, batch, hidden]).astype(np.float32))]
        names[5:7] = ["h0", "c0"]
    if peepholes:
        inits.append(init("P", rng.normal(0, 0.5, [dirs, 3 * hidden]).astype(np.float32)))
        names[7] = "P"
    node = helper.make_node("DynamicQuantizeLSTM", names, ["y", "y_h", "y_c"], domain=MS, hidden_size=hidden,
                            direction=direction, **attrs)
    outs = [("y", TP.FLOAT, [seq, dirs, batch, hidden]), ("y_h", TP.FLOAT, [dirs, batch, hidden]),
            ("y_c", TP.FLOAT, [dirs, batch, hidden])]
    return ms_model([node], [("x", TP.FLOAT, [seq, batch, inp])], outs, inits), [seq, batch, inp]


# Not bit-exact: onnxruntime's sigmoid and tanh are its own approximations, and each step quantizes
# the hidden state to uint8 again, so a last-bit difference that crosses a rounding boundary moves
# one hidden value by one code (about 0.01) and the next step's gates by that times R's scale.
LSTM_ATOL = 5e-3


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("w_t,per_row", [(np.int8, False), (np.int8, True), (np.uint8, False)])
def test_dynamic_quantize_lstm(direction, w_t, per_row):
    model, shape = quantized_lstm_model(direction, w_t, per_row)
    for _ in range(2):
        assert_matches_ort(model, {"x": RNG.normal(0, 1, shape).astype(np.float32)}, rtol=0, atol=LSTM_ATOL)


@pytest.mark.parametrize("attrs", [dict(peepholes=True), dict(clip=0.8), dict(input_forget=1)])
def test_dynamic_quantize_lstm_options(attrs):
    model, shape = quantized_lstm_model("forward", np.int8, False, **attrs)
    assert_matches_ort(model, {"x": RNG.normal(0, 1, shape).astype(np.float32)}, rtol=0, atol=LSTM_ATOL)


def test_dynamic_quantize_lstm_sequence_lens_is_refused():
    import onnxc
    model, _ = quantized_lstm_model("forward", np.int8, False)
    node = model.graph.node[0]
    node.input[4] = "lens"
    model.graph.initializer.append(init("lens", np.array([7, 5, 7], np.int32)))
    with pytest.raises(Exception, match="sequence_lens"):
        onnxc.InferenceSession(model.SerializeToString())


def test_dynamic_quantize_lstm_without_initial_state_starts_from_zeros():
    """onnxruntime 1.32 gives other first steps when initial_h / initial_c are omitted (up to 0.2
    from its own float LSTM, against 0.004 with explicit zero states): onnxc starts from zeros as
    the LSTM spec says, so the omitted states must give exactly what explicit zeros give."""
    omitted, shape = quantized_lstm_model("bidirectional", np.int8, True, states=False)
    zeros, _ = quantized_lstm_model("bidirectional", np.int8, True, states=False)
    node = zeros.graph.node[0]
    node.input[5], node.input[6] = "h0", "c0"
    zeros.graph.initializer.extend([init("h0", np.zeros([2, 3, 8], np.float32)),
                                    init("c0", np.zeros([2, 3, 8], np.float32))])
    x = RNG.normal(0, 1, shape).astype(np.float32)
    expected = assert_matches_ort(zeros, {"x": x}, rtol=0, atol=LSTM_ATOL)
    for a, e in zip(run_onnxc(omitted, {"x": x}), expected):
        np.testing.assert_array_equal(a, e)


def test_ms_quantize_dequantize_float16():
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS)
    model = ms_model([q, dq], [("x", TP.FLOAT16, [64])], [("q", TP.UINT8, [64]), ("y", TP.FLOAT16, [64])],
                     [init("s", np.float16(0.5)), init("z", np.uint8(3))])
    x = (np.arange(-40, 24) * 0.25).astype(np.float16)   # ties at every odd quarter
    x[-1] = 1000
    assert_matches_ort(model, {"x": x}, rtol=0, atol=0)


def test_ms_quantize_int4_and_dequantize():
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS)
    z = helper.make_tensor("z", TP.INT4, [], [-2])
    model = ms_model([q, dq], [("x", TP.FLOAT, [40])], [("y", TP.FLOAT, [40])], [init("s", np.float32(0.5)), z])
    assert_matches_ort(model, {"x": (np.arange(-20, 20) * 0.25).astype(np.float32)}, rtol=0, atol=0)


# --- QAttention, QEmbedLayerNormalization -------------------------------------------------------

def qattention_model(x_t, w_t, per_column, mask=None, past=0, batch=2, seq=4, hidden=16, heads=2, seed=0,
                     **attrs):
    """A QAttention node over input (batch, seq, hidden) of type x_t, its weight of type w_t
    (7-bit int8 values: see weights()) with a scale and zero point per tensor or per column;
    ``mask``: None, "end", "end_start", "2d" or "3d" as in Attention's tests. The model and feeds."""
    rng = np.random.default_rng(seed)
    total, d, columns = past + seq, hidden // heads, [3 * hidden] if per_column else []
    x_zero = rng.integers(*RANGE[x_t], endpoint=True)
    inits = [init("weight", weights(w_t, [hidden, 3 * hidden])),
             init("bias", rng.normal(0, 0.3, 3 * hidden).astype(np.float32)),
             init("input_scale", np.float32(0.02)),
             init("weight_scale", rng.uniform(0.001, 0.01, columns).astype(np.float32)),
             init("input_zero_point", x_t(x_zero)), init("weight_zero_point", weights(w_t, columns))]
    feeds = {"input": rng.integers(*RANGE[x_t], (batch, seq, hidden), endpoint=True).astype(x_t)}
    inputs = [("input", ONNX_TYPE[x_t], ["b", "s", hidden])]
    names = ["input", "weight", "bias", "input_scale", "weight_scale", "", "input_zero_point", "weight_zero_point"]
    lengths = rng.integers(1, total + 1, batch)
    if mask is not None:
        names[5] = "mask_index"
        if mask in ("end", "end_start"):
            starts = np.minimum(rng.integers(0, 2, batch), lengths - 1)
            feeds["mask_index"] = (lengths if mask == "end" else np.concatenate([lengths, starts])).astype(np.int32)
        elif mask == "2d":
            feeds["mask_index"] = (np.arange(total)[None, :] < lengths[:, None]).astype(np.int32)
        else:
            feeds["mask_index"] = (rng.random((batch, seq, total)) > 0.3).astype(np.int32)
            feeds["mask_index"][:, :, 0] = 1
        inputs.append(("mask_index", TP.INT32, list(feeds["mask_index"].shape)))
    outputs = [("output", TP.FLOAT, ["b", "s", hidden])]
    if past:
        names.append("past")
        feeds["past"] = rng.normal(0, 1, (2, batch, heads, past, d)).astype(np.float32)
        inputs.append(("past", TP.FLOAT, [2, "b", heads, "p", d]))
        outputs.append(("present", TP.FLOAT, [2, "b", heads, "t", d]))
    node = helper.make_node("QAttention", names, [n for n, _, _ in outputs], domain=MS, num_heads=heads, **attrs)
    return ms_model([node], inputs, outputs, inits), feeds


@pytest.mark.parametrize("w_t", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column", [False, True])
def test_qattention(w_t, per_column):
    """The QKV product is exact in both (int32 sums scaled in float32 alike); the attention that
    follows sums float32 in another order: within the default tolerance."""
    model, feeds = qattention_model(np.uint8, w_t, per_column, mask="end")
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("mask", [None, "end_start", "2d", "3d"])
def test_qattention_masks(mask):
    model, feeds = qattention_model(np.uint8, np.uint8, False, mask=mask)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("case", [
    {"unidirectional": 1}, {"past": 3}, {"past": 3, "unidirectional": 1, "mask": "2d"}, {"past": 2, "mask": "end"},
    {"scale": 0.3, "mask_filter_value": -1000.0, "mask": "2d"}, {"batch": 1, "seq": 7, "hidden": 24, "heads": 3}])
def test_qattention_variants(case):
    model, feeds = qattention_model(np.uint8, np.int8, True, **case)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("w_t,mask", [(np.int8, None), (np.uint8, "2d")])
def test_qattention_int8_input(w_t, mask):
    """onnxruntime's CPU kernel takes uint8 input only. int8 x with zero point z gives the same
    differences x - z as uint8 x + 128 with zero point z + 128, so onnxruntime's result for that
    model is the expected one."""
    model, feeds = qattention_model(np.int8, w_t, True, mask=mask, unidirectional=1)
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    twin.graph.input[0].type.tensor_type.elem_type = TP.UINT8
    zero = next(t for t in twin.graph.initializer if t.name == "input_zero_point")
    zero.CopyFrom(init(zero.name, np.uint8(int(numpy_helper.to_array(zero)) + 128)))
    shifted = feeds | {"input": (feeds["input"].astype(np.int16) + 128).astype(np.uint8)}
    for a, e in zip(run_onnxc(model, feeds), run_ort(twin, shifted)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_qattention_projects_with_8_bit_weights():
    """The QKV projection is one MatMulIntegerToFloat node function on the 8-bit weights, not a
    float MatMul of dequantized ones."""
    import os

    import onnxc
    model, _ = qattention_model(np.uint8, np.int8, True, mask="end")
    sess = onnxc.InferenceSession(model.SerializeToString())
    with open(os.path.join(sess.artifact_dir, "model.c"), encoding="utf-8") as f:
        functions = re.findall(r"^ONNXC_NODE static int (node\d+_\w+)\(", f.read(), re.M)
    assert any("_MatMulIntegerToFloat" in name for name in functions), functions
    assert not any(re.search(r"_(Fused)?MatMul_|DequantizeLinear", name) for name in functions), functions


@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("segments,mask", [(True, True), (False, False)])
def test_qembed_layer_normalization(t, segments, mask):
    """Tables dequantized in float32 as onnxruntime's kernel does; the layer normalization sums
    in another order: within the default tolerance. mask_index_out exactly."""
    rng = np.random.default_rng(9)
    batch, seq, hidden, vocab = 2, 5, 16, 30
    shapes = {"word": (vocab, hidden), "position": (8, hidden), "segment": (2, hidden), "gamma": (hidden,),
              "beta": (hidden,)}
    if not segments:
        del shapes["segment"]
    inits = [init(f"{name}_q", rng.integers(*RANGE[t], shape, endpoint=True).astype(t))
             for name, shape in shapes.items()]
    inits += [init(f"{name}_s", np.float32(rng.uniform(0.002, 0.05))) for name in shapes]
    inits += [init(f"{name}_z", t(rng.integers(*RANGE[t], endpoint=True))) for name in shapes]
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int32)}
    if segments:
        feeds["segment_ids"] = rng.integers(0, 2, (batch, seq)).astype(np.int32)
    if mask:
        feeds["mask"] = (np.arange(seq)[None, :] < np.array([[seq], [2]])).astype(np.int32)
    tables = ["word", "position", "segment" if segments else "", "gamma", "beta"]
    names = ["input_ids", "segment_ids" if segments else "", *[f"{n}_q" if n else "" for n in tables[:5]],
             "mask" if mask else "", *[f"{n}_s" if n else "" for n in tables], *[f"{n}_z" if n else "" for n in tables]]
    node = helper.make_node("QEmbedLayerNormalization", names, ["layernorm_out", "mask_index_out"], domain=MS,
                            epsilon=1e-5)
    model = ms_model([node], [(n, TP.INT32, ["b", "s"]) for n in feeds],
                     [("layernorm_out", TP.FLOAT, ["b", "s", hidden]), ("mask_index_out", TP.INT32, ["b"])], inits)
    assert_matches_ort(model, feeds)


# --- QLinearWhere ---------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("same_scale", [False, True])
@pytest.mark.parametrize("shapes", [([256], [256], [256]), ([4, 1], [1, 256], [256])])
def test_qlinear_where(t, same_scale, shapes):
    """Every 8-bit value of X and Y, broadcasting; exactly: the same float32 dequantize and
    quantize per value as onnxruntime's tables (Z's scale and zero point also X's: a copy)."""
    c_shape, x_shape, y_shape = shapes
    inits = qparams(t, "xyz", 3)
    if same_scale:
        inits = [init("x_s", numpy_helper.to_array(inits[4])), init("x_z", numpy_helper.to_array(inits[5]))] + inits[2:]
    node = helper.make_node("QLinearWhere", ["c", "x", "x_s", "x_z", "y", "y_s", "y_z", "z_s", "z_z"], ["z"], domain=MS)
    model = ms_model([node], [("c", TP.BOOL, c_shape), ("x", ONNX_TYPE[t], x_shape), ("y", ONNX_TYPE[t], y_shape)],
                     [("z", ONNX_TYPE[t], list(np.broadcast_shapes(*shapes)))], inits)
    feeds = {"c": RNG.random(c_shape) > 0.5, "x": every_value(t, x_shape), "y": every_value(t, y_shape)}
    assert_matches_ort(model, feeds)


def test_info_marks_quantized_contrib_ops(tmp_path, capsys):
    """onnxc info marks QAttention and QLinearWhere supported and names a contrib op onnxc lacks."""
    import onnx

    from onnxc import cli
    model, _ = qattention_model(np.uint8, np.int8, False)
    where = helper.make_node("QLinearWhere", ["c", "q", "input_scale", "input_zero_point", "q", "input_scale",
                                              "input_zero_point", "input_scale", "input_zero_point"], ["w"], domain=MS)
    missing = helper.make_node("QOrderedMatMul", ["w"], ["y"], domain=MS)
    model.graph.node.extend([helper.make_node("QuantizeLinear", ["output", "input_scale", "input_zero_point"], ["q"]),
                             where, missing])
    model.graph.input.append(helper.make_tensor_value_info("c", TP.BOOL, ["b", "s", 16]))
    model.graph.output.append(helper.make_tensor_value_info("y", TP.FLOAT, ["b", "s", 16]))
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    code = cli.main(["info", str(path)])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "1 operator(s) not supported: com.microsoft::QOrderedMatMul" in out
    for op in ("QAttention", "QLinearWhere"):
        assert re.search(rf"com\.microsoft::{op} \(opset 1\): 1 node\(s\)\s+ok", out), out
