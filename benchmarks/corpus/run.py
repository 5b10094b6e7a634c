"""The corpus run: every selected model fetched or exported into the corpus cache, then
measured at every thread count in a compile cache of its own (so compile times are cold),
gathered into one JSON-ready dict."""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from .. import harness
from ..suite import machine_info, private_cache
from . import measure
from .registry import CorpusModel, cache_dir

Log = Callable[[str], None]

# The SIMD extensions that decide which kernels a CPU runs, as /proc/cpuinfo names them.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd",
              "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
              "asimd", "asimddp", "sve")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    threads: list[int]
    timing: harness.TimingConfig
    modes: bool = True            # the three thread measurements
    openvino: bool = True         # the OpenVINO column, when openvino is installed
    rebuild: bool = False         # download, export and quantize again
    decoder_steps: int = 32       # tokens generated per timed generation of a decoder


def simd_flags() -> list[str]:
    from onnxc.runtime.cpu import host_features
    found = host_features() or frozenset()
    return [flag for flag in SIMD_FLAGS if flag in found]


def prepare(models: list[CorpusModel], rebuild: bool, log: Log) -> dict[str, str]:
    """Fetches or makes every model's file; name -> path, or name -> 'error: ...'."""
    cache = cache_dir()
    paths = {}
    for entry in models:
        start = time.perf_counter()
        try:
            paths[entry.name] = entry.source.fetch(cache, rebuild)
            log(f"{entry.name}: {paths[entry.name]} ({time.perf_counter() - start:.0f} s)")
        except Exception as e:  # noqa: BLE001 - an unavailable model is reported, the run goes on
            paths[entry.name] = f"error: {measure.one_line(e)}"
            log(f"{entry.name}: unavailable: {paths[entry.name][7:]}")
    return paths


def model_feed(path: str, entry: CorpusModel) -> dict[str, np.ndarray]:
    """The entry's feed, restricted to the inputs the file has (an exporter may drop an unused
    one); an input the feed lacks is an error."""
    graph = onnx.load(path, load_external_data=False).graph
    initialized = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in initialized]
    feed = entry.make_feed()
    missing = [n for n in names if n not in feed]
    if missing:
        raise KeyError(f"the feed has no {', '.join(missing)}")
    return {n: feed[n] for n in names}


def run_corpus(models: list[CorpusModel], config: CorpusConfig, log: Log,
               checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every model at every thread count; ``checkpoint`` gets the results so far after each
    model (a long run interrupted keeps what it measured)."""
    paths = prepare(models, config.rebuild, log)
    machine = machine_info()
    machine["simd"] = simd_flags()
    results: dict[str, Any] = {"machine": machine, "config": _config_record(models, config), "models": {}}
    workdir = tempfile.mkdtemp(prefix="onnxc-corpus-")
    try:
        for entry in models:
            results["models"][entry.name] = bench_model(entry, paths[entry.name], config,
                                                        os.path.join(workdir, entry.name), log)
            if checkpoint:
                checkpoint(results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["geomean"] = {str(t): geomean_at(results["models"], t) for t in config.threads}
    results["machine"]["load_average_end"] = _load_average()
    return results


def bench_model(entry: CorpusModel, path: str, config: CorpusConfig, folder: str, log: Log) -> dict[str, Any]:
    record: dict[str, Any] = {"what": entry.what, "source": entry.source.describe(), "threads": {}}
    if path.startswith("error: "):
        record["error"] = "unavailable: " + path[7:]
        return record
    record["file"] = os.path.basename(path)
    try:
        feed = model_feed(path, entry)
    except Exception as e:  # noqa: BLE001
        record["error"] = f"feed: {measure.one_line(e)}"
        return record
    record["inputs"] = {name: list(array.shape) for name, array in feed.items()}
    with private_cache(os.path.join(folder, "cache")):
        for threads in config.threads:
            result = measure.measure(path, feed, threads, config.timing, modes=config.modes,
                                     with_openvino=config.openvino,
                                     decoder_steps=config.decoder_steps if entry.decoder else 0)
            record["threads"][str(threads)] = result
            log(progress_line(entry.name, result))
    shutil.rmtree(folder, ignore_errors=True)
    return record


def geomean_at(models: dict[str, Any], threads: int) -> float | None:
    ratios = [m["threads"][str(threads)]["ratio"] for m in models.values()
              if "ratio" in m.get("threads", {}).get(str(threads), {})]
    return harness.geometric_mean(ratios) if ratios else None


def progress_line(name: str, result: dict[str, Any]) -> str:
    at = f"{name} threads={result['threads']}"
    if "error" in result:
        return f"{at}: error: {result['error']}"
    match = "match" if result["outputs_match"] else f"OUTPUTS DIFFER ({result.get('mismatch')})"
    return (f"{at}: onnxruntime {result['onnxruntime']['median_ms']:.3f} ms, onnxc {result['onnxc']['median_ms']:.3f} "
            f"ms, ratio {result['ratio']:.2f}, max rel diff {result['max_rel_diff']:.2g} {match}")


def _config_record(models: list[CorpusModel], config: CorpusConfig) -> dict[str, Any]:
    return {"models": [m.name for m in models], "threads": config.threads, "modes": config.modes,
            "openvino": config.openvino, "decoder_steps": config.decoder_steps,
            "timing": dataclasses.asdict(config.timing), "corpus_dir": "$ONNXC_CORPUS_DIR or ~/.cache/onnxc/corpus"}


def _load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None
