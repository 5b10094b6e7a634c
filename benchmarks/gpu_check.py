"""The CUDA build on a machine with a GPU, in one run: what CPU-only CI cannot check.

    python -m onnxc.benchmarks.gpu_check [--json OUT.json] [--models NAME ...] [--runs N]

1. The ONNX node conformance cases the CPU build passes, run on the GPU (CUDAExecutionProvider,
   nvcc for the GPU present, exact float32 as the cases' tolerances assume): pass / fail /
   refused (not on the GPU), with each failure's reason.
2. The light CNN zoo and the other benchmark models on the GPU against onnxc's CPU build:
   largest difference of the outputs.
3. Side by side with onnxruntime's CUDA provider where the installed onnxruntime has it
   (onnxruntime-gpu): median run time of each, and their ratio (onnxc / onnxruntime): from
   host arrays (``run``), and with inputs and outputs in GPU memory (``run_with_iobinding``
   on OrtValues on "cuda"), also as a CUDA graph (``enable_cuda_graph``) for both.
4. Float32 GEMM and convolution in TF32 (``use_tf32``, the default, as onnxruntime's) against
   exact float32 (``use_tf32=0``): the largest difference from the CPU build of each.

It prints a Markdown report (the GPU's name and the date first) and, with --json, writes the
numbers; docs/cuda.md keeps the results of the runs made so far.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from typing import Any

import numpy as np

CUDA = "CUDAExecutionProvider"


def gpu_name() -> str:
    from ..runtime import cuda
    lib = cuda._driver()
    if lib is None or cuda.device_count() == 0:
        return "no CUDA GPU"
    import ctypes
    dev, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
    lib.cuDeviceGet(ctypes.byref(dev), 0)
    lib.cuDeviceGetName(name, 256, dev)
    return f"{name.value.decode(errors='replace')} ({', '.join(cuda.archs(0))})"


def conformance(limit: int | None = None) -> dict[str, Any]:
    """Every conformance case the CPU build passes, on the GPU."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(here), "tests"))
    import onnxc
    from conformance.cases import all_cases, expected_failures, run_case
    known = expected_failures()
    names = [n for n in sorted(all_cases()) if n not in known][:limit]
    result: dict[str, Any] = {"pass": 0, "fail": 0, "refused": 0, "failures": {}, "seconds": 0.0}
    start = time.monotonic()
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                run_case(all_cases()[name], tmp, target="cuda", cuda_archs=_archs(), cuda_tf32=False)
                result["pass"] += 1
            except onnxc.UnsupportedError:
                result["refused"] += 1
            except Exception as e:  # a wrong value or a failed run: the reason is the finding
                result["fail"] += 1
                result["failures"][name] = f"{type(e).__name__}: {str(e)[:300]}"
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


def _archs() -> tuple[str, ...]:
    from ..runtime import cuda
    return cuda.archs(0)


def _median_ms(run, runs: int) -> float:
    run()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _max_diff(want: list[Any], got: list[Any]) -> float:
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               if np.asarray(a).size else 0.0 for a, b in zip(want, got))


def _bound_run(api: Any, sess: Any, feed: dict[str, np.ndarray]) -> Any:
    """A run of ``sess`` (onnxc's or onnxruntime's) with its inputs and outputs in GPU memory,
    bound once: what a pipeline that stays on the GPU pays per run."""
    binding = sess.io_binding()
    for name, array in feed.items():
        binding.bind_ortvalue_input(name, api.OrtValue.ortvalue_from_numpy(array, "cuda", 0))
    probe = sess.run(None, feed)   # the outputs' shapes, for buffers of their own (a CUDA graph needs them)
    for out, array in zip(sess.get_outputs(), probe):
        binding.bind_ortvalue_output(out.name, api.OrtValue.ortvalue_from_numpy(np.asarray(array), "cuda", 0))

    def run() -> None:
        sess.run_with_iobinding(binding)
    return run


def models(names: list[str] | None, runs: int) -> list[dict[str, Any]]:
    import onnxc
    from .models import select
    try:
        import onnxruntime as ort
        ort_gpu = CUDA in ort.get_available_providers()
    except ImportError:
        ort, ort_gpu = None, False
    rows = []
    for bench in select(names):
        row: dict[str, Any] = {"model": bench.name}
        try:
            model = bench.build()
            feed = bench.feed(model)
            cpu = onnxc.InferenceSession(model.SerializeToString())
            gpu = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA, "CPUExecutionProvider"])
            row["providers"] = gpu.get_providers()
            want, got = cpu.run(None, feed), gpu.run(None, feed)
            row["max_abs_diff"] = _max_diff(want, got)
            exact = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"use_tf32": 0})])
            row["max_abs_diff_fp32"] = _max_diff(want, exact.run(None, feed))
            row["onnxc_gpu_ms"] = _median_ms(lambda: gpu.run(None, feed), runs)
            row["onnxc_cpu_ms"] = _median_ms(lambda: cpu.run(None, feed), max(3, runs // 4))
            if gpu.get_providers()[0] == CUDA:
                row["onnxc_bound_ms"] = _median_ms(_bound_run(onnxc, gpu, feed), runs)
                graph = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"enable_cuda_graph": 1})])
                row["onnxc_graph_ms"] = _median_ms(_bound_run(onnxc, graph, feed), runs)
            if ort_gpu:
                so = ort.SessionOptions()
                so.log_severity_level = 3
                ref = ort.InferenceSession(model.SerializeToString(), so, providers=[CUDA, "CPUExecutionProvider"])
                row["ort_gpu_ms"] = _median_ms(lambda: ref.run(None, feed), runs)
                row["ratio"] = row["onnxc_gpu_ms"] / row["ort_gpu_ms"]
                row["ort_bound_ms"] = _median_ms(_bound_run(ort, ref, feed), runs)
                ref_graph = ort.InferenceSession(model.SerializeToString(), so,
                                                 providers=[(CUDA, {"enable_cuda_graph": "1"})])
                row["ort_graph_ms"] = _median_ms(_bound_run(ort, ref_graph, feed), runs)
                if "onnxc_bound_ms" in row:
                    row["ratio_bound"] = row["onnxc_bound_ms"] / row["ort_bound_ms"]
                    row["ratio_graph"] = row["onnxc_graph_ms"] / row["ort_graph_ms"]
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc()
        rows.append(row)
    return rows


def report(data: dict[str, Any]) -> str:
    c = data.get("conformance") or {}
    lines = [f"# CUDA check, {data['date']}, {data['gpu']}", ""]
    if c:
        lines += [f"Conformance on the GPU: {c['pass']} pass, {c['fail']} fail, {c['refused']} not on the GPU "
                  f"({c['seconds']} s)", ""]
        lines += [f"- {name}: {why}" for name, why in sorted(c["failures"].items())[:50]]
        lines.append("")
    lines += ["Times in ms (medians); ratio = onnxc / onnxruntime. *run*: from host arrays; *bound*: inputs "
              "and outputs in GPU memory (IOBinding); *graph*: bound, as a CUDA graph. Differences from "
              "onnxc's CPU build: TF32 (the default) and exact float32 (use_tf32=0).", "",
              "| model | on | diff TF32 | diff fp32 | onnxc CPU | onnxc run | ort run | ratio | onnxc bound "
              "| ort bound | ratio | onnxc graph | ort graph | ratio |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data.get("models", []):
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error'][:80]} |" + " |" * 12)
            continue
        fmt = lambda k, f="{:.3f}": f.format(r[k]) if k in r else "-"  # noqa: E731
        lines.append(f"| {r['model']} | {r['providers'][0]} | {fmt('max_abs_diff', '{:.2e}')} "
                     f"| {fmt('max_abs_diff_fp32', '{:.2e}')} | {fmt('onnxc_cpu_ms')} | {fmt('onnxc_gpu_ms')} "
                     f"| {fmt('ort_gpu_ms')} | {fmt('ratio', '{:.2f}')} | {fmt('onnxc_bound_ms')} | {fmt('ort_bound_ms')} "
                     f"| {fmt('ratio_bound', '{:.2f}')} | {fmt('onnxc_graph_ms')} | {fmt('ort_graph_ms')} "
                     f"| {fmt('ratio_graph', '{:.2f}')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the numbers here")
    p.add_argument("--models", nargs="*", help="benchmark models (default: all)")
    p.add_argument("--runs", type=int, default=20, help="timed runs per model (default 20)")
    p.add_argument("--no-conformance", action="store_true", help="skip the conformance cases")
    p.add_argument("--limit", type=int, help="at most this many conformance cases")
    args = p.parse_args(argv)
    data: dict[str, Any] = {"date": datetime.date.today().isoformat(), "gpu": gpu_name()}
    if not args.no_conformance:
        data["conformance"] = conformance(args.limit)
    data["models"] = models(args.models, args.runs)
    print(report(data))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
