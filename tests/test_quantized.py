"""Quantized models in integer arithmetic: the requantization helper, the fuse_qdq pass, the
com.microsoft QGemm op, and ``--target c`` packages of QDQ models that keep int8 weights and
need no floating-point unit where the model does not ask for float."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_onnxc, run_ort
from onnxc.codegen.templates import render
from onnxc.compiler import frontend
from onnxc.compiler.passes.pipeline import run_pipeline
from test_embedded import make, package, run_demo, write_inputs
from tools import ensure_tools


def init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


# --- requantization: integer-only and float32 give the same bits ------------------------------------------

HARNESS = r"""
int main(void)
{
    int32_t acc, lo, hi;
    uint32_t bits;
    while (scanf("%d %u %d %d", &acc, &bits, &lo, &hi) == 4)
        printf("%d\n", onnxc_requant(acc, bits, lo, hi));
    return 0;
}
"""


@pytest.mark.parametrize("embedded", [False, True], ids=["float", "integer"])
def test_requantization_is_float32_arithmetic_rounded_half_to_even(tmp_path, embedded):
    """onnxc_requant(acc, scale) = clamp(rint(float32(float32(acc) * scale))): the float code
    and the integer-only code (a package's) against numpy's float32 on 160,000 pairs, among
    them exact ties (scales of a few bits) and accumulators beyond float32's 24 bits."""
    src = tmp_path / "requant.c"
    src.write_text("#include <stdint.h>\n#include <string.h>\n#include <math.h>\n#include <stdio.h>\n"
                   "#define ONNXC_INLINE static inline\n" + render("c/helpers/requant.c.j2", {"embedded": embedded})
                   + HARNESS)
    exe = tmp_path / "requant"
    subprocess.run(["cc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Wconversion", "-Werror", str(src), "-o", str(exe),
                    "-lm"], check=True)
    rng = np.random.default_rng(3)
    n = 40_000
    acc = np.concatenate([rng.integers(-2**31, 2**31, n), rng.integers(-3000, 3000, n),
                          rng.integers(-2**26, 2**26, n), rng.integers(-2**20, 2**20, n)]).astype(np.int32)
    scale = np.concatenate([10.0 ** rng.uniform(-9, 1, 2 * n),
                            2.0 ** rng.integers(-20, 3, 2 * n) * rng.choice([1, 1.5, 0.75, 1.25], 2 * n)]).astype(np.float32)
    for lo, hi in ((-133, 122), (-2**30, 2**30)):
        text = "\n".join(f"{a} {b} {lo} {hi}" for a, b in zip(acc, scale.view(np.uint32)))
        out = np.array(subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.split(),
                       np.int64)
        product = np.clip(acc.astype(np.float32) * scale, np.float32(lo), np.float32(hi))
        np.testing.assert_array_equal(out, np.rint(product).astype(np.int64))


# --- a QDQ network ----------------------------------------------------------------------------------------

def qdq_net(int8_io: bool = False, seed: int = 0) -> onnx.ModelProto:
    """Conv (per-channel int8 weights, int32 bias) -> ReLU -> MaxPool -> Reshape -> Gemm
    (transposed per-row weights, int32 bias) -> MatMul, each op between DequantizeLinear and
    QuantizeLinear as onnxruntime's quantizer writes them; float in and out, or int8 in and out."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, value):
        inits.append(init(name, value))
        return name

    def dq(x, scale, zero, axis=None, name=None):
        out = name or f"{x}_dq"
        kw = {"axis": axis} if axis is not None else {}
        nodes.append(helper.make_node("DequantizeLinear", [x, scale, zero], [out], **kw))
        return out

    def q(x, scale, zero):
        nodes.append(helper.make_node("QuantizeLinear", [x, scale, zero], [f"{x}_q"]))
        return f"{x}_q"

    xs, xz = np.float32(0.05), np.int8(3)
    const("xs", xs), const("xz", xz)
    x = "x"
    if not int8_io:
        x = q("x", "xs", "xz")
    # Conv 4 -> 8, 3x3, pads 1, per-channel weights (small: onnxruntime's AVX2 kernels
    # saturate 16-bit partial sums of large ones)
    ws = (rng.random(8) * 0.02 + 0.01).astype(np.float32)
    const("w1", rng.integers(-40, 41, (8, 4, 3, 3)).astype(np.int8))
    const("w1s", ws), const("w1z", np.zeros(8, np.int8))
    const("b1", rng.integers(-300, 300, 8).astype(np.int32))
    const("b1s", (xs * ws).astype(np.float32)), const("b1z", np.zeros(8, np.int32))
    nodes.append(helper.make_node("Conv", [dq(x, "xs", "xz"), dq("w1", "w1s", "w1z", axis=0),
                                           dq("b1", "b1s", "b1z", axis=0)], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    const("r1s", np.float32(0.15)), const("r1z", np.int8(-5))     # zero point above -128: ReLU is a Max
    r1 = q("r1", "r1s", "r1z")
    nodes.append(helper.make_node("MaxPool", [dq(r1, "r1s", "r1z")], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    p1 = q("p1", "r1s", "r1z")
    const("shape", np.array([1, -1], np.int64))
    nodes.append(helper.make_node("Reshape", [dq(p1, "r1s", "r1z"), "shape"], ["f1"]))
    f1 = q("f1", "r1s", "r1z")
    # Gemm 200 -> 6, B transposed, one scale per output
    gs = (rng.random(6) * 0.01 + 0.005).astype(np.float32)
    const("w2", rng.integers(-40, 41, (6, 200)).astype(np.int8))
    const("w2s", gs), const("w2z", np.zeros(6, np.int8))
    const("b2", rng.integers(-2000, 2000, 6).astype(np.int32))
    const("b2s", (np.float32(0.15) * gs).astype(np.float32)), const("b2z", np.zeros(6, np.int32))
    nodes.append(helper.make_node("Gemm", [dq(f1, "r1s", "r1z"), dq("w2", "w2s", "w2z", axis=0),
                                           dq("b2", "b2s", "b2z", axis=0)], ["g1"], transB=1))
    const("g1s", np.float32(1.5)), const("g1z", np.int8(2))
    g1 = q("g1", "g1s", "g1z")
    # MatMul 6 -> 5, per-tensor
    const("w3", rng.integers(-60, 61, (6, 5)).astype(np.int8)), const("w3s", np.float32(0.03)), const("w3z", np.int8(1))
    nodes.append(helper.make_node("MatMul", [dq(g1, "g1s", "g1z"), dq("w3", "w3s", "w3z")], ["m1"]))
    const("m1s", np.float32(2.0)), const("m1z", np.int8(-7))
    y = q("m1", "m1s", "m1z")
    if not int8_io:
        y = dq(y, "m1s", "m1z", name="y")
    else:
        nodes.append(helper.make_node("Identity", [y], ["y"]))
    elem = TP.INT8 if int8_io else TP.FLOAT
    return make_model(nodes, [("x", elem, [1, 4, 10, 10])], [("y", elem, [1, 5])], inits, opset=13)


def feeds_for(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if model.graph.input[0].type.tensor_type.elem_type == TP.INT8:
        return {"x": rng.integers(-128, 128, (1, 4, 10, 10)).astype(np.int8)}
    return {"x": (rng.standard_normal((1, 4, 10, 10)) * 2).astype(np.float32)}


def test_fuse_qdq_makes_the_quantized_ops():
    graph = frontend.build_graph(frontend.load_model(qdq_net()))
    run_pipeline(graph, check=True, target="c")
    assert [n.op_type for n in graph.nodes] == ["QuantizeLinear", "QLinearConv", "Max", "MaxPool", "Reshape", "QGemm",
                                                "QLinearMatMul", "DequantizeLinear"]
    # the weights stay int8, the biases int32
    conv = graph.nodes[1]
    assert conv.inputs[3].const.dtype == np.int8 and conv.inputs[8].const.dtype == np.int32
    # on the host too (the 8-bit GEMM computes them), but not for CUDA (float kernels there)
    for target, fused in (("native", True), ("cuda", False)):
        graph = frontend.build_graph(frontend.load_model(qdq_net()))
        run_pipeline(graph, check=True, target=target)
        assert ("QLinearConv" in [n.op_type for n in graph.nodes]) == fused, target


def test_fuse_qdq_leaves_what_it_cannot_express():
    """A bias at another scale than x_scale * w_scale, and a Q whose scale differs from the
    MaxPool's DQ, stay in float."""
    model = qdq_net()
    for t in model.graph.initializer:
        if t.name == "b1s":
            t.CopyFrom(init("b1s", numpy_helper.to_array(t) * np.float32(1.5)))
    nodes = model.graph.node
    for n in nodes:
        if n.op_type == "QuantizeLinear" and n.input[0] == "p1":
            n.input[1] = "g1s"
    graph = frontend.build_graph(frontend.load_model(model))
    run_pipeline(graph, check=True, target="c")
    ops = [n.op_type for n in graph.nodes]
    assert "QLinearConv" not in ops and "FusedConv" in ops and ops.count("QGemm") == 1
    pool = next(n for n in graph.nodes if n.op_type == "MaxPool")
    assert pool.inputs[0].dtype.name == "float"


@pytest.mark.parametrize("int8_io", [False, True], ids=["float_io", "int8_io"])
def test_qdq_package_is_integer_and_matches_onnxruntime(tmp_path, int8_io):
    """The package of a QDQ network gives exactly onnxruntime's values (its optimizer makes
    the same quantized ops), and keeps the weights in int8."""
    model = qdq_net(int8_io)
    feeds = feeds_for(model)
    folder = package(tmp_path, model, "qnet")
    make(folder)
    got = run_demo(folder, "qnet", write_inputs(folder, feeds))
    expected = run_ort(model, feeds)[0]
    np.testing.assert_array_equal(got[0].astype(expected.dtype), expected.reshape(-1))
    weights = open(os.path.join(folder, "qnet_weights.c")).read()
    assert "const int8_t qnet_w_" in weights and "const float qnet_w_" not in weights


@pytest.mark.parametrize("int8_io", [False, True], ids=["float_io", "int8_io"])
@pytest.mark.parametrize("threads", [1, 2])
def test_qdq_network_on_the_host_matches_onnxruntime_exactly(int8_io, threads):
    """The native build of a QDQ network runs the quantized ops onnxruntime's optimizer makes
    (the 8-bit GEMM under QLinearConv, QGemm and QLinearMatMul): the same values, bit for bit."""
    model = qdq_net(int8_io)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    for seed in (1, 2, 3):
        feeds = feeds_for(model, seed)
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(model, feeds)[0])


def test_int8_package_needs_no_float_unit(tmp_path):
    """An int8-in, int8-out QDQ network builds with the floating-point registers forbidden
    (x86 -mgeneral-regs-only), and for a Cortex-M4 with software float its object calls no
    float routine (__aeabi_f*, __aeabi_d*) and nothing of libm."""
    folder = package(tmp_path, qdq_net(int8_io=True), "qnet")
    obj = str(tmp_path / "model.o")
    proc = subprocess.run(["gcc", "-O2", "-std=c99", "-ffreestanding", "-mgeneral-regs-only", "-c",
                           os.path.join(folder, "qnet.c"), "-o", obj], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ensure_tools({"arm-none-eabi-gcc": "gcc-arm-none-eabi", "arm-none-eabi-nm": "binutils-arm-none-eabi"})
    m4 = str(tmp_path / "model.m4.o")
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft", "-Os", "-std=c99",
                    "-ffreestanding", "-c", os.path.join(folder, "qnet.c"), "-o", m4], check=True)
    needed = subprocess.run(["arm-none-eabi-nm", "-u", m4], capture_output=True, text=True, check=True).stdout.split()[1::2]
    floaty = [s for s in needed if s.startswith(("__aeabi_f", "__aeabi_d", "__aeabi_i2f", "__aeabi_ui2f",
                                                   "__aeabi_l2f", "__aeabi_i2d")) or s not in
              ("memcpy", "memset", "memmove", "strlen", "__aeabi_uldivmod", "__aeabi_ldivmod", "__aeabi_lmul",
               "__aeabi_llsl", "__aeabi_llsr", "__aeabi_lasr") and not s.startswith("qnet_w_")]
    assert not floaty, needed



def test_qdq_package_takes_a_fraction_of_the_float_memory(tmp_path):
    """Int8 weights and activations: against the same package with the weights dequantized at
    compile time (fuse_qdq disabled), under a third of the weights and of the arena."""
    from onnxc.driver import CompileOptions, compile_model
    sizes = {}
    for disabled in ((), ("fuse_qdq",)):
        info = compile_model(qdq_net(), str(tmp_path / f"p{len(disabled)}"),
                             CompileOptions(target="c", prefix="qnet", disabled_passes=disabled))
        sizes[bool(disabled)] = (info["weights_bytes"], info["arena_bytes"])
    (w_int, a_int), (w_float, a_float) = sizes[False], sizes[True]
    assert w_int * 3 < w_float and a_int * 3 < a_float, sizes


# --- com.microsoft QGemm -----------------------------------------------------------------------------------

@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 1)])
@pytest.mark.parametrize("quantized_out", [True, False])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm_matches_onnxruntime(a_type, trans_a, trans_b, quantized_out, per_column):
    rng = np.random.default_rng(5)
    m, k, n = 3, 20, 7
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    b_type = np.int8
    bs = (rng.random(n) * 0.02 + 0.01).astype(np.float32) if per_column else np.float32(0.02)
    bz = np.zeros(n, b_type) if per_column else b_type(0)
    inits = [init("as", np.float32(0.05)), init("az", np.asarray(3, a_type)),
             init("b", rng.integers(-40, 41, b_shape).astype(b_type)), init("bs", bs), init("bz", bz),
             init("c", rng.integers(-500, 500, n).astype(np.int32))]
    inputs = ["a", "as", "az", "b", "bs", "bz", "c"]
    out_type = TP.FLOAT
    if quantized_out:
        inits += [init("ys", np.float32(0.07)), init("yz", np.asarray(-4 if a_type is np.int8 else 9, a_type))]
        inputs += ["ys", "yz"]
        out_type = TP.INT8 if a_type is np.int8 else TP.UINT8
    node = helper.make_node("QGemm", inputs, ["y"], domain="com.microsoft", alpha=0.75, transA=trans_a, transB=trans_b)
    elem = TP.INT8 if a_type is np.int8 else TP.UINT8
    model = make_model([node], [("a", elem, a_shape)], [("y", out_type, (m, n))], inits, opset=13,
                       extra_opsets={"com.microsoft": 1})
    info = np.iinfo(a_type)
    feeds = {"a": rng.integers(info.min, info.max, a_shape).astype(a_type)}
    expected = run_ort(model, feeds)[0]
    got = run_onnxc(model, feeds)[0]
    assert got.dtype == expected.dtype
    if quantized_out:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_qgemm_rejects_what_it_does_not_know():
    node = helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz"], ["y"], domain="com.microsoft", beta=2.0)
    inits = [init("as", np.float32(0.05)), init("az", np.uint8(3)), init("b", np.ones((4, 2), np.int8)),
             init("bs", np.float32(0.02)), init("bz", np.int8(0))]
    model = make_model([node], [("a", TP.UINT8, (3, 4))], [("y", TP.FLOAT, (3, 2))], inits, opset=13,
                       extra_opsets={"com.microsoft": 1})
    with pytest.raises(Exception, match="unknown attribute 'beta'"):
        run_onnxc(model, {"a": np.ones((3, 4), np.uint8)})
