"""The quantized ops that a native build computes through the 8-bit GEMM (c/helpers/qgemm.c.j2):
QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger and com.microsoft QGemm, bit for bit
against onnxruntime, at the shapes where the GEMM has edges (rows and columns past a tile,
K not a multiple of 4, one row) and at one and two threads. Weights stay within +-40 (or
as far from a uint8 zero point): onnxruntime's u8s8 kernels on CPUs without VNNI saturate
16-bit partial sums of larger ones, and the reference must be exact to be one."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort

ONNX_TYPE = {np.int8: TP.INT8, np.uint8: TP.UINT8, np.int32: TP.INT32, np.float32: TP.FLOAT}


def init(name: str, value) -> "object":
    return numpy_helper.from_array(np.asarray(value), name)


def ints(rng, dtype, shape, spread: int = 0) -> np.ndarray:
    """Random values of dtype (spread: within +-spread of the type's middle)."""
    if spread:
        mid = 128 if dtype is np.uint8 else 0
        return rng.integers(mid - spread, mid + spread + 1, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def assert_exact(model, feeds, threads: int = 1, kernel: str = "onnxc_qgemm(") -> None:
    """onnxc's outputs equal onnxruntime's, and the build took the 8-bit GEMM (or ``kernel``)."""
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    want = run_ort(model, feeds)
    for got, expected in zip(sess.run(None, feeds), want):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    sources = "".join(open(f).read() for f in glob.glob(os.path.join(sess.artifact_dir, "model*.c")))
    assert kernel in sources


CONV_CASES = {
    # name: (x type, w type, channels, out channels, group, kernel, strides, pads, dilations, image)
    "u8s8_3x3_pads": (np.uint8, np.int8, 16, 40, 1, 3, 1, 1, 1, (13, 11)),
    "s8s8_3x3_stride2": (np.int8, np.int8, 12, 33, 1, 3, 2, 1, 1, (15, 14)),
    "u8u8_5x5_asym_pads": (np.uint8, np.uint8, 5, 9, 1, 5, 1, (2, 1, 0, 2), 1, (9, 12)),
    "u8s8_1x1": (np.uint8, np.int8, 30, 17, 1, 1, 1, 0, 1, (7, 9)),
    "s8s8_1x1_stride2": (np.int8, np.int8, 8, 24, 1, 1, 2, 0, 1, (10, 10)),
    "u8s8_groups": (np.uint8, np.int8, 12, 18, 3, 3, 1, 1, 1, (8, 8)),
    "u8s8_depthwise": (np.uint8, np.int8, 16, 16, 16, 3, 1, 1, 1, (9, 9)),
    "s8s8_depthwise_multiplier": (np.int8, np.int8, 8, 16, 8, 3, 2, 1, 1, (11, 10)),
    # (the depthwise kernel's row and column phases: strides 2 and 3, uneven pads, dilation)
    "u8s8_depthwise_5x5_stride2_asym_pads": (np.uint8, np.int8, 6, 6, 6, 5, 2, (2, 1, 1, 2), 1, (13, 10)),
    "s8s8_depthwise_dilated_stride2": (np.int8, np.int8, 5, 5, 5, 3, 2, 2, 2, (11, 12)),
    "u8u8_depthwise_stride3_no_pads": (np.uint8, np.uint8, 4, 4, 4, 3, 3, 0, 1, (10, 14)),
    "u8s8_dilated": (np.uint8, np.int8, 6, 10, 1, 3, 1, 2, 2, (12, 12)),
    "s8s8_1d": (np.int8, np.int8, 7, 11, 1, 3, 1, 1, 1, (37,)),
}


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV_CASES)
def test_qlinear_conv(case, per_channel, bias):
    xt, wt, c, m, group, kernel, strides, pads, dilations, image = CONV_CASES[case]
    rank = len(image)
    rng = np.random.default_rng(abs(hash((case, per_channel, bias))) % 1000)
    w = ints(rng, wt, [m, c // group] + [kernel] * rank, spread=40)
    if per_channel:
        w_scale = (rng.random(m) * 0.05 + 0.01).astype(np.float32)
        w_zero = (np.zeros(m) + (128 if wt is np.uint8 else 0)).astype(wt)
    else:
        w_scale = np.float32(0.03)
        w_zero = np.asarray(131 if wt is np.uint8 else 3, wt)
    x_zero = np.asarray(117 if xt is np.uint8 else -9, xt)
    inits = [init("xs", np.float32(0.02)), init("xz", x_zero), init("w", w), init("ws", w_scale),
             init("wz", w_zero), init("ys", np.float32(0.37)), init("yz", np.asarray(100 if xt is np.uint8 else 5, xt))]
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(init("B", rng.integers(-3000, 3000, m).astype(np.int32)))
        inputs.append("B")
    pads = list(pads) if isinstance(pads, tuple) else [pads] * (2 * rank)
    node = helper.make_node("QLinearConv", inputs, ["y"], group=group, pads=pads, strides=[strides] * rank,
                            dilations=[dilations] * rank)
    model = make_model([node], [("x", ONNX_TYPE[xt], ["N", c, *image])],
                       [("y", ONNX_TYPE[xt], ["N", m] + [None] * rank)], inits, opset=10)
    for n, threads in ((1, 1), (2, 2)):
        feeds = {"x": ints(rng, xt, [n, c, *image])}
        assert_exact(model, feeds, threads, "direct int8 depthwise" if group == c and m == c else "onnxc_qgemm(")


def test_qlinear_conv_big_enough_for_two_threads():
    """64 -> 96 channels of 3x3 over 28 x 28: about 43 M multiply-adds, which the GEMM splits."""
    rng = np.random.default_rng(3)
    c, m = 64, 96
    inits = [init("xs", np.float32(0.02)), init("xz", np.int8(-4)), init("w", ints(rng, np.int8, [m, c, 3, 3], 40)),
             init("ws", (rng.random(m) * 0.01 + 0.002).astype(np.float32)), init("wz", np.zeros(m, np.int8)),
             init("ys", np.float32(0.9)), init("yz", np.int8(-3)), init("B", rng.integers(-9000, 9000, m).astype(np.int32))]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"], ["y"], pads=[1] * 4)
    model = make_model([node], [("x", TP.INT8, [1, c, 28, 28])], [("y", TP.INT8, [1, m, 28, 28])], inits, opset=10)
    assert_exact(model, {"x": ints(rng, np.int8, [1, c, 28, 28])}, threads=2)


@pytest.mark.parametrize("x_zero,w_zero", [(None, None), (7, None), (200, 131)])
def test_conv_integer(x_zero, w_zero):
    rng = np.random.default_rng(5)
    w = ints(rng, np.uint8, [6, 3, 3, 3], 40)
    inits, inputs = [init("w", w)], ["x", "w"]
    if x_zero is not None:
        inits.append(init("xz", np.uint8(x_zero)))
    inputs.append("xz" if x_zero is not None else "")
    if w_zero is not None:
        inits.append(init("wz", np.asarray(w_zero, np.uint8)))
        inputs.append("wz")
    node = helper.make_node("ConvInteger", inputs, ["y"], pads=[1, 0, 1, 2], strides=[1, 2])
    model = make_model([node], [("x", TP.UINT8, [2, 3, 10, 11])], [("y", TP.INT32, [2, 6, None, None])], inits,
                       opset=10)
    assert_exact(model, {"x": ints(rng, np.uint8, [2, 3, 10, 11])})


# (A shape, B shape): one row, tile edges (8 rows, 32 columns), K not a multiple of 4, batches
MATMUL_SHAPES = [([1, 13], [13, 7]), ([9, 33], [33, 65]), ([2, 17, 64], [64, 32]), ([3, 5, 21], [3, 21, 40]),
                 ([96, 150], [150, 300])]


@pytest.mark.parametrize("const_b", [False, True])
@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "@" + "x".join(map(str, s[1])))
def test_qlinear_matmul(shapes, a_type, b_type, const_b):
    a_shape, b_shape = shapes
    rng = np.random.default_rng(len(a_shape) * 100 + a_shape[-1])
    b = ints(rng, b_type, b_shape, 40)
    inits = [init("as", np.float32(0.05)), init("az", np.asarray(3 if a_type is np.int8 else 140, a_type)),
             init("bs", np.float32(0.02)), init("bz", np.asarray(-2 if b_type is np.int8 else 127, b_type)),
             init("ys", np.float32(0.6)), init("yz", np.asarray(5, a_type))]
    if const_b:
        inits.append(init("b", b))
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    y_shape = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))) + [a_shape[-2], b_shape[-1]]
    inputs = [("a", ONNX_TYPE[a_type], a_shape)] + ([] if const_b else [("b", ONNX_TYPE[b_type], b_shape)])
    model = make_model([node], inputs, [("y", ONNX_TYPE[a_type], y_shape)], inits, opset=10)
    feeds = {"a": ints(rng, a_type, a_shape)}
    if not const_b:
        feeds["b"] = b
    assert_exact(model, feeds, threads=2 if a_shape[-2] >= 96 else 1)


@pytest.mark.parametrize("b_zero", ["none", "scalar", "per_column"])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "@" + "x".join(map(str, s[1])))
def test_matmul_integer(shapes, b_zero):
    a_shape, b_shape = shapes
    if b_zero == "per_column" and len(b_shape) > 2:
        pytest.skip("onnxruntime takes per-column zero points of a matrix B only")
    rng = np.random.default_rng(a_shape[-1])
    b = ints(rng, np.int8, b_shape, 40)
    inits, inputs = [init("B", b), init("az", np.uint8(133))], ["A", "B", "az"]
    if b_zero == "scalar":
        inits.append(init("bz", np.int8(-5)))
        inputs.append("bz")
    elif b_zero == "per_column":
        inits.append(init("bz", rng.integers(-6, 6, b_shape[-1]).astype(np.int8)))
        inputs.append("bz")
    y_shape = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))) + [a_shape[-2], b_shape[-1]]
    model = make_model([helper.make_node("MatMulInteger", inputs, ["Y"])], [("A", TP.UINT8, a_shape)],
                       [("Y", TP.INT32, y_shape)], inits, opset=10)
    assert_exact(model, {"A": ints(rng, np.uint8, a_shape)}, threads=2 if a_shape[-2] >= 96 else 1)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("quantized_output", [False, True])
def test_qgemm(trans_a, trans_b, per_column, quantized_output):
    rng = np.random.default_rng(trans_a * 4 + trans_b * 2 + per_column)
    m, k, n = 11, 37, 45
    a = ints(rng, np.uint8, [k, m] if trans_a else [m, k])
    b = ints(rng, np.int8, [n, k] if trans_b else [k, n], 40)
    b_scale = (rng.random(n) * 0.02 + 0.01).astype(np.float32) if per_column else np.float32(0.02)
    b_zero = np.zeros(n, np.int8) if per_column else np.int8(0)
    inits = [init("as", np.float32(0.04)), init("az", np.uint8(121)), init("b", b), init("bs", b_scale),
             init("bz", b_zero), init("c", rng.integers(-2000, 2000, n).astype(np.int32))]
    inputs = ["a", "as", "az", "b", "bs", "bz", "c"]
    out = TP.FLOAT
    if quantized_output:
        inits += [init("ys", np.float32(0.5)), init("yz", np.uint8(90))]
        inputs += ["ys", "yz"]
        out = TP.UINT8
    node = helper.make_node("QGemm", inputs, ["y"], domain="com.microsoft", alpha=0.75, transA=trans_a,
                            transB=trans_b)
    model = make_model([node], [("a", TP.UINT8, list(a.shape))], [("y", out, [m, n])], inits, opset=13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert_exact(model, {"a": a})
