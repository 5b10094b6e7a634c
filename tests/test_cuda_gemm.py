"""GEMM and convolution on the GPU (templates/cuda/{matmul,gemm,fused_matmul,conv}.cu.j2 over
cuda/helpers_gemm.j2; conv_depthwise.cu.j2, conv_transpose.cu.j2), run with the CUDA runtime
emulated: results against onnxruntime, with TF32 tensor cores (use_tf32, the default; emulated
with the device's rounding) and without, and the generated source launches each node over
many blocks, not on one thread."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from helpers import make_model, run_ort
from onnxc.runtime import cuda

CUDA = "CUDAExecutionProvider"
EXACT = {"rtol": 1e-5, "atol": 1e-5}
TF32 = {"rtol": 1e-2, "atol": 1e-2}   # 10-bit mantissas of the operands, float32 sums


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def run_cuda(model, feeds, ops: str, tf32: bool = True, sync: bool = True):
    """Outputs of the emulated CUDA build; asserts that each node of the ops (a regex) is launched
    over blocks of 256 threads (with __syncthreads where `sync`)."""
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"use_tf32": int(tf32)})])
    assert sess.get_providers()[0] == CUDA
    with open(os.path.join(sess._folder, "model.cu")) as f:
        src = f.read()
    launch = "ONNXC_LAUNCH_SYNC" if sync else "ONNXC_LAUNCH"
    nodes = re.findall(rf"ONNXC_LAUNCH\w*\((node\d+_(?:{ops})_\w*_kernel), ([^,]+), (\d+),", src)
    assert nodes, f"no {ops} node"
    for name, blocks, threads in nodes:
        assert re.search(rf"{launch}\({name}, blocks, 256,", src), f"{name} is not launched in parallel"
    return sess.run(None, feeds)


def check_both(model, feeds, ops: str):
    """Exact float32 with use_tf32 off; TF32 within its tolerance with it on, and actually rounded."""
    refs = run_ort(model, feeds)
    exact = run_cuda(model, feeds, ops, tf32=False)
    tf32 = run_cuda(model, feeds, ops, tf32=True)
    for ref, e, t in zip(refs, exact, tf32):
        np.testing.assert_allclose(e, ref, **EXACT)
        np.testing.assert_allclose(t, ref, **TF32)
        assert np.abs(t - e).max() > 1e-5, "use_tf32 made no difference: not on the TF32 path"


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_matmul_batched_broadcast_and_stacked():
    """Batch axes broadcast (one GEMM per entry) and A's batch stacked as rows (B shared), sizes
    of several tiles, a symbolic dim."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("MatMul", ["c", "d"], ["z"])]
    model = make_model(nodes, [("a", TP.FLOAT, [3, 1, "M", 37]), ("b", TP.FLOAT, [2, 37, 70]),
                               ("c", TP.FLOAT, ["M", 33, 20]), ("d", TP.FLOAT, [20, 130])],
                       [("y", TP.FLOAT, [3, 2, "M", 70]), ("z", TP.FLOAT, ["M", 33, 130])])
    check_both(model, {"a": rand(rng, (3, 1, 67, 37)), "b": rand(rng, (2, 37, 70)),
                       "c": rand(rng, (67, 33, 20)), "d": rand(rng, (20, 130))}, "MatMul")


def test_matmul_float16_on_tensor_cores_is_exact():
    """float16 operands are TF32 values: the tensor-core path gives float32 sums of exact
    products, whatever use_tf32 says."""
    rng = np.random.default_rng(2)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [("a", TP.FLOAT16, [2, 1, 20, 45]), ("b", TP.FLOAT16, [3, 45, 70])],
                       [("y", TP.FLOAT16, [2, 3, 20, 70])])
    feeds = {"a": rand(rng, (2, 1, 20, 45), np.float16), "b": rand(rng, (3, 45, 70), np.float16)}
    exact = (feeds["a"].astype(np.float32) @ feeds["b"].astype(np.float32)).astype(np.float16)
    for tf32 in (True, False):
        out = run_cuda(model, feeds, "MatMul", tf32=tf32)[0]
        np.testing.assert_allclose(out.astype(np.float32), exact.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_matmul_integer_with_zero_points():
    rng = np.random.default_rng(3)
    model = make_model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                       [("a", TP.UINT8, [70, 33]), ("b", TP.INT8, [33, 66]), ("az", TP.UINT8, []),
                        ("bz", TP.INT8, [])], [("y", TP.INT32, [70, 66])])
    feeds = {"a": rng.integers(0, 256, (70, 33)).astype(np.uint8), "b": rng.integers(-128, 128, (33, 66)).astype(np.int8),
             "az": np.array(7, np.uint8), "bz": np.array(-3, np.int8)}
    expected = (feeds["a"].astype(np.int64) - 7) @ (feeds["b"].astype(np.int64) + 3)   # (numpy: onnxruntime differs, saturating u8 x s8 sums here)
    np.testing.assert_array_equal(run_cuda(model, feeds, "MatMulInteger")[0], expected)


def test_gemm_transposed_alpha_beta_row_bias():
    rng = np.random.default_rng(4)
    model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
                       [("a", TP.FLOAT, [37, 70]), ("b", TP.FLOAT, [66, 37]), ("c", TP.FLOAT, [70, 1])],
                       [("y", TP.FLOAT, [70, 66])])
    check_both(model, {"a": rand(rng, (37, 70)), "b": rand(rng, (66, 37)), "c": rand(rng, (70, 1))}, "Gemm")


def test_gemm_double_with_matrix_addend():
    rng = np.random.default_rng(5)
    model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)],
                       [("a", TP.DOUBLE, [65, 30]), ("b", TP.DOUBLE, [70, 30]), ("c", TP.DOUBLE, [65, 70])],
                       [("y", TP.DOUBLE, [65, 70])])
    feeds = {"a": rand(rng, (65, 30), np.float64), "b": rand(rng, (70, 30), np.float64), "c": rand(rng, (65, 70), np.float64)}
    np.testing.assert_allclose(run_cuda(model, feeds, "Gemm")[0], run_ort(model, feeds)[0], rtol=1e-12, atol=1e-12)


def test_fused_matmul_bias_and_activation():
    """MatMul -> Add (bias) -> Relu becomes FusedMatMul; its epilogue runs as Y is stored."""
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    w = helper.make_tensor("w", TP.FLOAT, [24, 70], rand(rng, (24, 70)).ravel())
    bias = helper.make_tensor("bias", TP.FLOAT, [70], rand(rng, (70,)).ravel())
    model = make_model(nodes, [("a", TP.FLOAT, ["N", 30, 24])], [("y", TP.FLOAT, ["N", 30, 70])], [w, bias])
    check_both(model, {"a": rand(rng, (3, 30, 24))}, "FusedMatMul")


def test_conv_groups_strides_pads_dilations_1x1_and_3d():
    """Implicit GEMM with groups, strides, asymmetric pads and dilations (symbolic N); a 1x1
    convolution (X itself is B); a 3-D one."""
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 1], strides=[1, 2], dilations=[2, 1], group=2),
             helper.make_node("Conv", ["x2", "w2"], ["y2"]),
             helper.make_node("Conv", ["x3", "w3"], ["y3"], pads=[1, 0, 1, 1, 0, 1], strides=[2, 1, 1])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 4, 9, 11]), ("w", TP.FLOAT, [6, 2, 3, 3]), ("b", TP.FLOAT, [6]),
                               ("x2", TP.FLOAT, [2, 5, 9, 10]), ("w2", TP.FLOAT, [70, 5, 1, 1]),
                               ("x3", TP.FLOAT, [1, 2, 5, 4, 6]), ("w3", TP.FLOAT, [3, 2, 3, 2, 3])],
                       [("y", TP.FLOAT, ["N", 6, None, None]), ("y2", TP.FLOAT, [2, 70, 9, 10]),
                        ("y3", TP.FLOAT, [1, 3, 3, 3, 6])])
    check_both(model, {"x": rand(rng, (2, 4, 9, 11)), "w": rand(rng, (6, 2, 3, 3)), "b": rand(rng, (6,)),
                       "x2": rand(rng, (2, 5, 9, 10)), "w2": rand(rng, (70, 5, 1, 1)),
                       "x3": rand(rng, (1, 2, 5, 4, 6)), "w3": rand(rng, (3, 2, 3, 2, 3))}, "Conv")


def test_conv_float16_with_bias():
    rng = np.random.default_rng(9)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
                       [("x", TP.FLOAT16, [1, 3, 9, 11]), ("w", TP.FLOAT16, [70, 3, 3, 3]), ("b", TP.FLOAT16, [70])],
                       [("y", TP.FLOAT16, [1, 70, 9, 11])])
    feeds = {"x": rand(rng, (1, 3, 9, 11), np.float16), "w": rand(rng, (70, 3, 3, 3), np.float16),
             "b": rand(rng, (70,), np.float16)}
    out = run_cuda(model, feeds, "Conv", tf32=False)[0]
    np.testing.assert_allclose(out.astype(np.float32), run_ort(model, feeds)[0].astype(np.float32), rtol=2e-3, atol=2e-3)


def test_depthwise_conv_and_conv_transpose_a_thread_per_output():
    """Depthwise Conv (symbolic N, so not the static phase-plane kernel) and ConvTranspose
    (groups, strides, dilations, pads, output_padding): a thread per output element."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2, 1, 0], strides=[2, 1], group=4),
             helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["z"], pads=[1, 0, 0, 1], strides=[2, 3],
                              dilations=[1, 2], output_padding=[1, 0], group=2)]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 4, 9, 11]), ("w", TP.FLOAT, [4, 1, 3, 3]), ("b", TP.FLOAT, [4]),
                               ("wt", TP.FLOAT, [4, 3, 3, 2]), ("bt", TP.FLOAT, [6])],
                       [("y", TP.FLOAT, ["N", 4, None, None]), ("z", TP.FLOAT, ["N", 6, None, None])])
    feeds = {"x": rand(rng, (2, 4, 9, 11)), "w": rand(rng, (4, 1, 3, 3)), "b": rand(rng, (4,)),
             "wt": rand(rng, (4, 3, 3, 2)), "bt": rand(rng, (6,))}
    for out, ref in zip(run_cuda(model, feeds, "Conv|ConvTranspose", sync=False), run_ort(model, feeds)):
        np.testing.assert_allclose(out, ref, **EXACT)


def test_static_depthwise_conv_with_fused_activation():
    """Static sizes: the phase-plane kernel, a block per channel with the planes in shared
    memory; Conv -> Relu fused into its epilogue."""
    rng = np.random.default_rng(11)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2], group=5),
             helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, [2, 5, 9, 11]), ("w", TP.FLOAT, [5, 1, 3, 3]), ("b", TP.FLOAT, [5])],
                       [("y", TP.FLOAT, [2, 5, None, None])])
    feeds = {"x": rand(rng, (2, 5, 9, 11)), "w": rand(rng, (5, 1, 3, 3)), "b": rand(rng, (5,))}
    np.testing.assert_allclose(run_cuda(model, feeds, "FusedConv")[0], run_ort(model, feeds)[0], **EXACT)


@pytest.mark.parametrize("act", ["Relu", "HardSwish"])
def test_static_depthwise_conv_with_the_activation_in_its_store(act):
    """Rows of whole vectors (32 wide): the C kernel applies a select-like activation as it
    stores (conv.INLINE_ACTS) and the CUDA kernel, on the same data, too."""
    rng = np.random.default_rng(12)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=5),
             helper.make_node(act, ["c"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, [1, 5, 16, 32]), ("w", TP.FLOAT, [5, 1, 3, 3]), ("b", TP.FLOAT, [5])],
                       [("y", TP.FLOAT, [1, 5, 16, 32])])
    feeds = {"x": rand(rng, (1, 5, 16, 32)) * 4, "w": rand(rng, (5, 1, 3, 3)), "b": rand(rng, (5,))}
    np.testing.assert_allclose(run_cuda(model, feeds, "FusedConv")[0], run_ort(model, feeds)[0], **EXACT)
