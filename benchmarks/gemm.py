"""GEMM microbenchmark: one ONNX MatMul, (M, K) x (K, N), timed in onnxc and onnxruntime
(interleaved, as the models are) and numpy's ``a @ b`` on the same shapes, as GFLOP/s.

B is either an initializer (weights: a compiler may pre-pack it) or a graph input. numpy
runs in a child process whose BLAS thread count is set through the environment before
numpy loads, since most BLAS libraries read it only once.

Run as a module only by ``numpy_time``: ``python -m <package>.gemm M K N THREADS MIN_RUNS MIN_SECONDS``.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from . import harness
from .builder import OPSET
from .children import run_module

Shape = tuple[int, int, int]  # M, K, N
SHAPES: list[Shape] = [(1024, 1024, 1024), (256, 256, 256), (128, 768, 768), (1, 512, 512)]
SMOKE_SHAPES: list[Shape] = [(256, 256, 256), (1, 512, 512)]
B_KINDS = ("weight", "input")
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                         "VECLIB_MAXIMUM_THREADS")


def operands(shape: Shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    m, k, n = shape
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def matmul_model(shape: Shape, b_kind: str, seed: int = 0) -> onnx.ModelProto:
    """Y = A @ B with B an initializer (``weight``) or a second input (``input``)."""
    m, k, n = shape
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])]
    initializers = []
    if b_kind == "weight":
        initializers.append(numpy_helper.from_array(operands(shape, seed)[1], "B"))
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, [k, n]))
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["Y"], name="gemm")], "gemm", inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnxc-benchmarks")
    model.ir_version = 8
    return model


def gflops(shape: Shape, seconds: float) -> float:
    m, k, n = shape
    return 2.0 * m * k * n / seconds / 1e9


def numpy_time(shape: Shape, threads: int, config: harness.TimingConfig) -> dict[str, Any]:
    """Median ``a @ b`` time from a child process with the BLAS thread count pinned."""
    return run_module("gemm", [*(str(d) for d in shape), str(threads), str(config.min_runs), str(config.min_seconds)],
                      extra_env={name: str(threads) for name in BLAS_THREAD_VARIABLES})


def _numpy_child(shape: Shape, threads: int, min_runs: int, min_seconds: float) -> dict[str, Any]:
    a, b = operands(shape)
    for _ in range(3):
        _ = a @ b
    times: list[int] = []
    deadline = time.perf_counter_ns() + int(min_seconds * 1e9)
    while len(times) < min_runs or time.perf_counter_ns() < deadline:
        start = time.perf_counter_ns()
        _ = a @ b
        times.append(time.perf_counter_ns() - start)
    return {"median_ms": float(np.median(times)) / 1e6, "runs": len(times), "blas": _blas_info(threads)}


def _blas_info(threads: int) -> dict[str, Any]:
    """Which BLAS numpy uses and its thread count, as threadpoolctl sees them (if installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"requested_threads": threads}
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    return {"requested_threads": threads,
            "pools": [{k: p.get(k) for k in ("internal_api", "version", "num_threads")} for p in pools]}


def run(shapes: list[Shape], threads_list: list[int], config: harness.TimingConfig, workdir: str,
        log: Callable[[str], None] | None = None, precision: str = "fp32") -> list[dict[str, Any]]:
    """Every shape, B kind and thread count: GFLOP/s of onnxc (its products in ``precision``),
    onnxruntime and numpy."""
    results = []
    for shape in shapes:
        feed_a, feed_b = operands(shape)
        for threads in threads_list:
            reference = numpy_time(shape, threads, config)
            for b_kind in B_KINDS:
                results.append(_one(shape, b_kind, threads, config, workdir, reference, feed_a, feed_b,
                                    precision))
                if log is not None:
                    log(_progress_line(results[-1]))
    return results


def _one(shape: Shape, b_kind: str, threads: int, config: harness.TimingConfig, workdir: str,
         reference: dict[str, Any], feed_a: np.ndarray, feed_b: np.ndarray, precision: str) -> dict[str, Any]:
    m, k, n = shape
    entry: dict[str, Any] = {"m": m, "k": k, "n": n, "b": b_kind, "threads": threads, "precision": precision}
    path = os.path.join(workdir, f"gemm_{m}x{k}x{n}_{b_kind}.onnx")
    if not os.path.exists(path):
        onnx.save(matmul_model(shape, b_kind), path)
    feed = {"A": feed_a} if b_kind == "weight" else {"A": feed_a, "B": feed_b}
    try:
        measured = harness.measure(path, feed, threads, config, precision)
    except Exception as e:  # noqa: BLE001 - one failing case is reported, the rest still run
        entry["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        return entry
    entry.update({"runs": measured["runs"], "outputs_match": measured["outputs_match"],
                  "max_rel_diff": measured["max_rel_diff"],
                  "onnxc_ms": measured["onnxc"]["median_ms"], "onnxruntime_ms": measured["onnxruntime"]["median_ms"],
                  "onnxc_gflops": gflops(shape, measured["onnxc"]["median_ms"] / 1e3),
                  "onnxruntime_gflops": gflops(shape, measured["onnxruntime"]["median_ms"] / 1e3)})
    if "error" in reference:
        entry["numpy_error"] = reference["error"]
        return entry
    entry.update({"numpy_ms": reference["median_ms"], "numpy_gflops": gflops(shape, reference["median_ms"] / 1e3),
                  "numpy_blas": reference["blas"]})
    entry["onnxc_over_numpy"] = entry["onnxc_gflops"] / entry["numpy_gflops"]
    return entry


def _progress_line(entry: dict[str, Any]) -> str:
    name = f"gemm {entry['m']}x{entry['k']}x{entry['n']} B {entry['b']} threads={entry['threads']}"
    if "error" in entry:
        return f"{name}: error: {entry['error']}"
    numpy_part = f", numpy {entry['numpy_gflops']:.1f}" if "numpy_gflops" in entry else ""
    return (f"{name}: GFLOP/s onnxc {entry['onnxc_gflops']:.1f}, onnxruntime {entry['onnxruntime_gflops']:.1f}"
            f"{numpy_part}")


if __name__ == "__main__":
    m_arg, k_arg, n_arg, threads_arg, runs_arg, seconds_arg = sys.argv[1:7]
    print(json.dumps(_numpy_child((int(m_arg), int(k_arg), int(n_arg)), int(threads_arg), int(runs_arg),
                                  float(seconds_arg))))
