"""The whole benchmark run: every selected model at every thread count, memory probes, the
GEMM microbenchmark and the target checks, gathered into one JSON-ready dict.

Each model gets a fresh compile cache of its own inside the run's temporary folder, so
onnxc's compile time is always a cold one and big artifacts are deleted as soon as
their model is done."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx

from . import gemm, harness, memory, targets
from .models import BenchModel, logits_model
from .sessions import SESSION_MAKERS

Log = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    threads: list[int]
    timing: harness.TimingConfig
    memory: bool
    gemm_shapes: list[gemm.Shape]
    smoke: bool = False
    precision: str = "fp32"   # onnxc's (session.onnxc.precision); onnxruntime runs float32


@contextlib.contextmanager
def private_cache(folder: str) -> Iterator[None]:
    """Points onnxc's compile cache at ``folder`` (read on every session creation) and restores
    the caller's setting after: the suite may run inside a process that has its own cache."""
    previous = os.environ.get("ONNXC_CACHE_DIR")
    os.makedirs(folder, exist_ok=True)
    os.environ["ONNXC_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("ONNXC_CACHE_DIR", None)
        else:
            os.environ["ONNXC_CACHE_DIR"] = previous


def run_suite(models: list[BenchModel], config: SuiteConfig, log: Log) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="onnxc-bench-")
    try:
        results: dict[str, Any] = {"machine": machine_info(), "config": _config_record(models, config), "models": {}}
        for entry in models:
            results["models"][entry.name] = bench_model(entry, config, os.path.join(workdir, entry.name), log)
        results["geomean"] = {str(t): _geomean_at(results["models"], t) for t in config.threads}
        if config.gemm_shapes:
            folder = os.path.join(workdir, "gemm")
            with private_cache(os.path.join(folder, "cache")):
                results["gemm"] = gemm.run(config.gemm_shapes, config.threads, config.timing, folder, log,
                                           config.precision)
        results["targets"] = targets.evaluate(results)
        results["machine"]["load_average_end"] = _load_average()
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def bench_model(entry: BenchModel, config: SuiteConfig, folder: str, log: Log) -> dict[str, Any]:
    """One model at every thread count; a failure is recorded and the suite goes on."""
    os.makedirs(folder, exist_ok=True)
    record: dict[str, Any] = {"quick": entry.quick, "target_ratio": targets.model_limit(entry.quick), "threads": {}}
    try:
        model = entry.build()
        feed = entry.feed(model)
    except Exception as e:  # noqa: BLE001 - e.g. the onnx package lacks the light zoo
        record["error"] = _one_line(e)
        log(f"{entry.name}: cannot build: {record['error']}")
        return record
    record["inputs"] = {name: list(array.shape) for name, array in feed.items()}
    model_path, feed_path = os.path.join(folder, "model.onnx"), os.path.join(folder, "feed.npz")
    onnx.save(model, model_path)
    logits = logits_model(model) if config.precision != "fp32" else None
    del model
    np.savez(feed_path, **feed)
    with private_cache(os.path.join(folder, "cache")):
        for threads in config.threads:
            record["threads"][str(threads)] = _at_threads(model_path, feed, feed_path, threads, config)
            log(_progress_line(entry.name, record["threads"][str(threads)]))
        if logits is not None:   # (the accuracy of a classifier's products, before its Softmax)
            logits_path = os.path.join(folder, "logits.onnx")
            onnx.save(logits, logits_path)
            try:
                record["logits"] = harness.accuracy(logits_path, feed, config.threads[0], config.precision)
                log(f"{entry.name} logits: max abs diff {record['logits']['max_abs_diff']:.3g}, relative "
                    f"{record['logits']['max_rel_diff']:.3g}")
            except Exception as e:  # noqa: BLE001 - reported per model
                record["logits"] = {"error": _one_line(e)}
    shutil.rmtree(folder, ignore_errors=True)
    return record


def _at_threads(model_path: str, feed: dict[str, np.ndarray], feed_path: str, threads: int,
                config: SuiteConfig) -> dict[str, Any]:
    try:
        result = harness.measure(model_path, feed, threads, config.timing, config.precision)
    except Exception as e:  # noqa: BLE001 - reported per model
        return {"threads": threads, "error": _one_line(e)}
    if config.memory:
        result["memory"] = {runtime: memory.measure(runtime, model_path, feed_path, threads)
                            for runtime in SESSION_MAKERS}
    return result


def _geomean_at(models: dict[str, Any], threads: int) -> float | None:
    ratios = [m["threads"][str(threads)]["ratio"] for m in models.values()
              if "ratio" in m.get("threads", {}).get(str(threads), {})]
    return harness.geometric_mean(ratios) if ratios else None


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _progress_line(name: str, result: dict[str, Any]) -> str:
    at = f"{name} threads={result['threads']}"
    if "error" in result:
        return f"{at}: error: {result['error']}"
    mismatch = "" if result["outputs_match"] else f" OUTPUTS DIFFER (max abs diff {result['max_abs_diff']:.3g})"
    if result.get("precision", "fp32") != "fp32":
        mismatch += (f" [{result['precision']}: max abs diff {result['max_abs_diff']:.3g}, "
                     f"relative {result['max_rel_diff']:.3g}]")
    return (f"{at}: onnxruntime {result['onnxruntime']['median_ms']:.3f} ms, onnxc {result['onnxc']['median_ms']:.3f} "
            f"ms, ratio {result['ratio']:.2f} ({result['runs']} runs){mismatch}")


def _config_record(models: list[BenchModel], config: SuiteConfig) -> dict[str, Any]:
    return {"models": [m.name for m in models], "threads": config.threads, "smoke": config.smoke,
            "memory": config.memory, "timing": dataclasses.asdict(config.timing), "precision": config.precision,
            "gemm_shapes": [list(s) for s in config.gemm_shapes]}


def machine_info() -> dict[str, Any]:
    """What a reader needs to compare two result files: processor, cores, versions, compiler."""
    import onnxruntime

    import onnxc
    from onnxc.runtime.options import usable_cores
    return {
        "cpu": _cpu_model(), "usable_cores": usable_cores(), "cpu_count": os.cpu_count(),
        "platform": platform.platform(), "python": platform.python_version(),
        "onnxc": onnxc.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__,
        "onnx": onnx.__version__, "toolchain": onnxc.CompileOptions().toolchain().identity(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_start": _load_average(),
    }


def _load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every number
    (threaded runs most), and a reader of the JSON should see it."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
