"""The emulated CUDA runtime as a checker: blocks and threads run in forward, reverse or shuffled
order (ONNXC_CUDA_EMULATE_ORDER, ONNXC_CUDA_EMULATE_SEED), and threads of a block that meet at
different __syncthreads fail the run. Each check is shown catching a bug planted in a kernel."""
from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model
from onnxc.codegen.toolchain import CudaToolchain
from onnxc.driver import CompileOptions, compile_model
from onnxc.runtime import cache, cuda

CUDA = "CUDAExecutionProvider"
ORDER, SEED = "ONNXC_CUDA_EMULATE_ORDER", "ONNXC_CUDA_EMULATE_SEED"


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def planted(model: onnx.ModelProto, folder: str, good: str, bad: str) -> onnxc.InferenceSession:
    """The model's emulated CUDA build with ``good`` (a piece of its source) replaced by ``bad``."""
    compile_model(model, folder, CompileOptions(target="cuda", cuda_emulate=True, cuda_tf32=False))
    path = os.path.join(folder, "model.cu")
    source = open(path).read()
    assert source.count(good) == 1, good
    with open(path, "w") as f:
        f.write(source.replace(good, bad))
    CudaToolchain(emulate=True).build_shared([path], os.path.join(folder, "libmodel.so"))
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    manifest["library_sha256"] = cache.sha256_file(os.path.join(folder, "libmodel.so"))
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return onnxc.InferenceSession(folder, providers=[CUDA])


def test_a_kernel_that_needs_blocks_in_order_fails_in_reverse_and_shuffled_order(tmp_path, monkeypatch):
    """Planted: each thread of a grid-stride Relu adds the element before its own, written by
    another thread, maybe of another block: a running sum, right only where the threads run
    in index order, as the emulation ran them before it had orders."""
    n = 2000   # (8 blocks of 256)
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", TP.FLOAT, [n])],
                       [("y", TP.FLOAT, [n])])
    sess = planted(model, str(tmp_path / "m"), "Y[i] = (float)((v_X < 0 ? 0 : v_X));",
                   "Y[i] = v_X + (i > 0 ? Y[i - 1] : 0.0f);")
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    in_order = np.cumsum(x, dtype=np.float32)
    # (the orders that break it first: a run in order would leave the right sums where the
    # output is written next, and a thread reading its neighbour early would read those)
    for order, seed in (("reverse", "0"), ("shuffle", "1"), ("shuffle", "2")):
        monkeypatch.setenv(ORDER, order)
        monkeypatch.setenv(SEED, seed)
        assert not np.array_equal(sess.run(None, {"x": x})[0], in_order), order
    monkeypatch.setenv(ORDER, "forward")
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], in_order)


def test_orders_run_a_correct_kernel_alike(tmp_path, monkeypatch):
    """A block-per-row reduction with barriers (and a grid-stride map after it) gives the same
    result in every order and seed."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], name="sum", keepdims=0),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    model = make_model(nodes, [("x", TP.FLOAT, [6, 3000])], [("y", TP.FLOAT, [6])],
                       [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    compile_model(model, str(tmp_path / "m"), CompileOptions(target="cuda", cuda_emulate=True))
    sess = onnxc.InferenceSession(str(tmp_path / "m"), providers=[CUDA])
    x = np.random.default_rng(1).standard_normal((6, 3000)).astype(np.float32)
    results = []
    for order, seed in (("forward", "0"), ("reverse", "0"), ("shuffle", "3"), ("shuffle", "4")):
        monkeypatch.setenv(ORDER, order)
        monkeypatch.setenv(SEED, seed)
        results.append(sess.run(None, {"x": x})[0])
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(results[0], np.maximum(x.astype(np.float64).sum(axis=1), 0), rtol=1e-5)


REDUCE_BARRIER = "    buf[t] = v;\n    __syncthreads();\n"


def reduce_model() -> onnx.ModelProto:
    return make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="sum", keepdims=0)],
                      [("x", TP.FLOAT, [4, 5000])], [("y", TP.FLOAT, [4])],
                      [numpy_helper.from_array(np.array([1], np.int64), "axes")])


KERNEL_START = "    if (!ctx->failed)\n        (void)node0_ReduceSum_sum("


@pytest.mark.parametrize("good, bad, message", [
    # odd and even threads wait at two different barriers
    (REDUCE_BARRIER,
     "    buf[t] = v;\n    if (t % 2 == 0)\n        __syncthreads();\n    else\n        __syncthreads();\n",
     r"threads 0 and 1 of block \d+ wait at different barriers \(lines \d+ and \d+ of model.cu\)"),
    # a thread leaves the kernel while the others wait
    (KERNEL_START, "    if (threadIdx.x == 7)\n        return;\n" + KERNEL_START,
     r"thread 7 of block \d+ returned while thread 0 waits at the barrier of line \d+ of model.cu"),
], ids=["two-barriers", "early-return"])
def test_threads_at_different_barriers_fail_the_run(tmp_path, good, bad, message):
    """(the unplanted reduction passes in every order: test_orders_run_a_correct_kernel_alike)"""
    sess = planted(reduce_model(), str(tmp_path / "m"), good, bad)
    x = np.ones((4, 5000), np.float32)
    with pytest.raises(onnxc.RuntimeFailure, match=r"divergent __syncthreads in node0_ReduceSum_sum_kernel: "
                                                   + message):
        sess.run(None, {"x": x})
