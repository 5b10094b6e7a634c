"""Fixed-point requantization (``--requantize fixed-point``): the int8 Conv and matrix-product
kernels requantize their int32 sums with TFLite's (and CMSIS-NN's) 31-bit multiplier and shift,
checked exactly against a numpy model of that arithmetic; the default float mode is unchanged."""
from __future__ import annotations

import math
import os
import subprocess
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import make_model, run_ort
from onnxc.codegen.templates import render
from onnxc.compiler.ops._quantize import quantize_multiplier
from test_embedded import make, package, run_demo, write_inputs
from test_quantized import qdq_net


# --- the arithmetic ---------------------------------------------------------------------------------------

def requantize_reference(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """arm_nn_requantize (two roundings) on exact integers: acc * 2^max(shift, 0), wrapped to
    int32, times the multiplier over 2^31 rounded half up, then divided by 2^max(-shift, 0)
    rounded half away from zero."""
    out = []
    for a, m, s in zip(acc.tolist(), multiplier.tolist(), shift.tolist()):
        v = (a << max(s, 0)) & 0xFFFFFFFF
        v = v - (1 << 32) if v >= 1 << 31 else v
        high = math.floor(Fraction(v * m, 1 << 31) + Fraction(1, 2))
        q = Fraction(abs(high), 1 << max(-s, 0))
        out.append(int(math.copysign(math.floor(q + Fraction(1, 2)), high)))
    return np.array(out, np.int64)


def test_quantize_multiplier_is_tflites():
    """A 31-bit mantissa in [2^30, 2^31) rounded half away from zero, and the shift; what
    TFLite's QuantizeMultiplier gives for values whose answer is known."""
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    assert quantize_multiplier(1.0) == (1 << 30, 1)
    assert quantize_multiplier(0.75) == (3 << 29, 0)
    assert quantize_multiplier(0.0) == (0, 0)
    assert quantize_multiplier(2.0 ** -40) == (0, 0)      # below 2^-32: flushed to zero
    assert quantize_multiplier(1 - 2.0 ** -33) == (1 << 30, 1)   # the mantissa rounds up to 2^31
    rng = np.random.default_rng(5)
    for real in 10.0 ** rng.uniform(-9, 3, 2000):
        m, s = quantize_multiplier(float(real))
        assert (1 << 30) <= m < (1 << 31)
        exact = Fraction(float(real)) * 2 ** (31 - s)
        assert abs(exact - m) <= Fraction(1, 2)
        if abs(exact - m) == Fraction(1, 2):
            assert m > exact


HARNESS = r"""
int main(void)
{
    int32_t acc, multiplier, shift, lo, hi;
    while (scanf("%d %d %d %d %d", &acc, &multiplier, &shift, &lo, &hi) == 5)
        printf("%d\n", onnxc_requant_fixed(acc, multiplier, shift, lo, hi));
    return 0;
}
"""


def test_fixed_point_requantization_is_arm_nn_requantize(tmp_path):
    """onnxc_requant_fixed against the numpy model on 60,000 triples: accumulators of every
    size, multipliers from TFLite's QuantizeMultiplier of scales 2^-31 to 2^4, exact ties
    (accumulators that are multiples of a power of two, multipliers of few bits), clamped."""
    src = tmp_path / "requant.c"
    src.write_text("#include <stdint.h>\n#include <stdio.h>\n#define ONNXC_INLINE static inline\n"
                   + render("c/helpers/requant_fixed.c.j2", {}) + HARNESS)
    exe = tmp_path / "requant"
    subprocess.run(["cc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Wconversion", "-Werror", str(src), "-o", str(exe)],
                   check=True)
    rng = np.random.default_rng(11)
    n = 15_000
    acc = np.concatenate([rng.integers(-2**31, 2**31, n), rng.integers(-3000, 3000, n),
                          rng.integers(-2**20, 2**20, n), rng.integers(-2**12, 2**12, n) * 2 ** rng.integers(0, 8, n)])
    pairs = [quantize_multiplier(float(r)) for r in 2.0 ** rng.uniform(-31, 4, 3 * n)]
    pairs += [((1 << 30) + (int(b) << 27), int(s)) for b, s in zip(rng.integers(0, 8, n), rng.integers(-20, 3, n))]
    multiplier = np.array([p[0] for p in pairs], np.int64)
    shift = np.array([p[1] for p in pairs], np.int64)
    exact = requantize_reference(acc, multiplier, shift)
    for lo, hi in ((-133, 122), (-2**31, 2**31 - 1)):
        text = "\n".join(f"{a} {m} {s} {lo} {hi}" for a, m, s in zip(acc, multiplier, shift))
        out = np.array(subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.split(),
                       np.int64)
        np.testing.assert_array_equal(out, np.clip(exact, lo, hi))


# --- the kernels ------------------------------------------------------------------------------------------

def _init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def conv_model(c: int, m: int, hw: tuple[int, int], kernel: tuple[int, int], group: int = 1, strides=(1, 1),
               pads=(0, 0, 0, 0), dilations=(1, 1), per_channel: bool = True, seed: int = 0):
    """One QLinearConv, int8 in and out, with its parameters (for the numpy model)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (m, c // group, *kernel)).astype(np.int8)
    k = c // group * kernel[0] * kernel[1]
    xs, ys = np.float32(0.02), np.float32(0.3)
    ws = (rng.uniform(0.5, 2, m if per_channel else 1) * 8 / (k ** 0.5 * 127 * 0.02) * 0.3 / 40).astype(np.float32)
    p = {"xs": xs, "xz": np.int8(-7), "w": w, "ws": ws, "wz": np.zeros(ws.shape, np.int8), "ys": ys,
         "yz": np.int8(4), "b": rng.integers(-5000, 5000, m).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            group=group, strides=list(strides), pads=list(pads), dilations=list(dilations))
    oh = (hw[0] + pads[0] + pads[2] - dilations[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (hw[1] + pads[1] + pads[3] - dilations[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    model = make_model([node], [("x", TP.INT8, [1, c, *hw])], [("y", TP.INT8, [1, m, oh, ow])],
                       [_init(k_, v) for k_, v in p.items()], opset=13)
    return model, p, dict(group=group, strides=strides, pads=pads, dilations=dilations)


def conv_reference(x: np.ndarray, p: dict, group: int, strides, pads, dilations) -> np.ndarray:
    """The int32 sums of QLinearConv (NCHW) plus the bias, in int64."""
    xq = np.pad(x.astype(np.int64) - int(p["xz"]), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    w = p["w"].astype(np.int64)
    m, cg, kh, kw = w.shape
    n, _, h, wd = xq.shape
    oh = (h - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    acc = np.zeros((n, m, oh, ow), np.int64) + p["b"].astype(np.int64)[None, :, None, None]
    mg = m // group
    for i in range(kh):
        for j in range(kw):
            patch = xq[:, :, i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:strides[0],
                       j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:strides[1]]
            for g in range(group):
                acc[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch[:, g * cg:(g + 1) * cg],
                                                         w[g * mg:(g + 1) * mg, :, i, j])
    return acc


def requantize_outputs(acc: np.ndarray, multipliers: list[float], channel_axis: int, zero: int) -> np.ndarray:
    """acc requantized per channel (TFLite's multipliers of the double products), plus the
    zero point, saturated to int8."""
    pairs = [quantize_multiplier(r) for r in multipliers]
    moved = np.moveaxis(acc, channel_axis, -1)
    mult = np.broadcast_to(np.array([q for q, _ in pairs]), moved.shape).reshape(-1)
    shift = np.broadcast_to(np.array([s for _, s in pairs]), moved.shape).reshape(-1)
    out = requantize_reference(moved.reshape(-1), mult, shift).reshape(moved.shape) + zero
    return np.moveaxis(np.clip(out, -128, 127), -1, channel_axis)


CONVS = {
    "3x3_per_channel": dict(c=4, m=8, hw=(9, 9), kernel=(3, 3), pads=(1, 1, 1, 1)),
    "1x1": dict(c=16, m=12, hw=(5, 5), kernel=(1, 1)),
    "depthwise_stride_2": dict(c=6, m=6, hw=(11, 10), kernel=(3, 3), group=6, strides=(2, 2), pads=(1, 0, 1, 1)),
    "odd_dilated_per_tensor": dict(c=3, m=5, hw=(7, 13), kernel=(3, 2), dilations=(2, 1), pads=(0, 2, 1, 0),
                                   per_channel=False),
}


def _package_outputs(tmp_path, model, feeds, *extra: str) -> np.ndarray:
    folder = package(tmp_path, model, "qk", *extra)
    make(folder)
    return run_demo(folder, "qk", write_inputs(folder, feeds))[0].astype(np.int64)


@pytest.mark.parametrize("case", sorted(CONVS))
def test_fixed_point_conv_package_is_the_numpy_model(tmp_path, case):
    model, p, attrs = conv_model(**CONVS[case])
    x = np.random.default_rng(1).integers(-128, 128, [d.dim_value for d in
                                                      model.graph.input[0].type.tensor_type.shape.dim]).astype(np.int8)
    got = _package_outputs(tmp_path, model, {"x": x}, "--requantize", "fixed-point")
    acc = conv_reference(x, p, **attrs)
    ws = np.broadcast_to(p["ws"], (acc.shape[1],))
    multipliers = [float(p["xs"]) * float(s) / float(p["ys"]) for s in ws]
    expected = requantize_outputs(acc, multipliers, 1, int(p["yz"]))
    assert np.unique(expected).size > 20            # neither saturated nor constant
    np.testing.assert_array_equal(got, expected.reshape(-1))
    # and within one step of onnxruntime's float arithmetic
    ort = run_ort(model, {"x": x})[0].astype(np.int64).reshape(-1)
    assert np.abs(got - ort).max() <= 1


def test_fixed_point_matrix_products_are_the_numpy_model(tmp_path):
    """QLinearMatMul (per tensor, nonzero zero points) into QGemm (transposed B, per-column
    scales, int32 bias), both requantized in fixed point."""
    rng = np.random.default_rng(4)
    p = {"as": np.float32(0.05), "az": np.int8(3), "b": rng.integers(-127, 128, (37, 19)).astype(np.int8),
         "bs": np.float32(0.011), "bz": np.int8(-2), "ys": np.float32(0.35), "yz": np.int8(-9),
         "w": rng.integers(-127, 128, (7, 19)).astype(np.int8),
         "ws": rng.uniform(0.004, 0.02, 7).astype(np.float32), "wz": np.zeros(7, np.int8),
         "c": rng.integers(-3000, 3000, 7).astype(np.int32), "gs": np.float32(0.9), "gz": np.int8(5)}
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["h"]),
             helper.make_node("QGemm", ["h", "ys", "yz", "w", "ws", "wz", "c", "gs", "gz"], ["y"], domain="com.microsoft",
                              transB=1)]
    model = make_model(nodes, [("a", TP.INT8, [3, 37])], [("y", TP.INT8, [3, 7])],
                       [_init(k, v) for k, v in p.items()], opset=13, extra_opsets={"com.microsoft": 1})
    a = rng.integers(-128, 128, (3, 37)).astype(np.int8)
    got = _package_outputs(tmp_path, model, {"a": a}, "--requantize", "fixed-point")
    acc = (a.astype(np.int64) - int(p["az"])) @ (p["b"].astype(np.int64) - int(p["bz"]))
    h = requantize_outputs(acc, [float(p["as"]) * float(p["bs"]) / float(p["ys"])], 1, int(p["yz"]))
    acc = (h - int(p["yz"])) @ p["w"].astype(np.int64).T + p["c"]
    expected = requantize_outputs(acc, [float(p["ys"]) * float(s) / float(p["gs"]) for s in p["ws"]], 1, int(p["gz"]))
    assert np.unique(expected).size > 10
    np.testing.assert_array_equal(got, expected.reshape(-1))


def test_fixed_point_needs_constant_scales(tmp_path):
    """A scale fed at run time cannot be split into a multiplier and shift at compile time: refused."""
    from onnxc import UnsupportedError
    from onnxc.driver import CompileOptions, compile_model
    model, _, _ = conv_model(c=2, m=2, hw=(4, 4), kernel=(1, 1))
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "ys"))
    model.graph.input.append(helper.make_tensor_value_info("ys", TP.FLOAT, []))
    with pytest.raises(UnsupportedError, match="constant float32 scales \\(y_scale is not\\)"):
        compile_model(model, str(tmp_path / "p"), CompileOptions(target="c", requantize="fixed_point"))


def test_float_mode_is_the_default_and_unchanged(tmp_path):
    """The default package is the one ``--requantize float`` writes, byte for byte, and calls
    no fixed-point code; ``fixed-point`` changes only how the kernels requantize."""
    model = qdq_net(int8_io=True)
    texts = {}
    for mode in ((), ("--requantize", "float"), ("--requantize", "fixed-point")):
        folder = package(tmp_path / "_".join(mode or ("default",)), model, "q", *mode)
        texts[mode] = open(os.path.join(folder, "q.c")).read().split("\n", 3)[3]   # (past the command line)
    assert texts[()] == texts[("--requantize", "float")]
    assert "onnxc_requant_fixed" not in texts[()] and "output_multiplier" not in texts[()]
    fixed = texts[("--requantize", "fixed-point")]
    assert fixed.count("onnxc_requant_fixed(") == 4   # the helper, QLinearConv, QGemm, QLinearMatMul


def test_fixed_point_is_not_for_cuda(tmp_path, capsys):
    from onnxc.cli import main as cli_main
    model, _, _ = conv_model(c=2, m=2, hw=(4, 4), kernel=(1, 1))
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    assert cli_main(["compile", path, "--target", "cuda", "--requantize", "fixed-point", "-o", str(tmp_path / "a")]) == 1
    assert "--requantize fixed-point: not with --target cuda" in capsys.readouterr().err
