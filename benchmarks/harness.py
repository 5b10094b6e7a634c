"""The measurement: onnxc and onnxruntime sessions for one model and thread count, timed
in the same process with their runs interleaved in turns (A A A ... B B B ... A A A ...),
so drift in clock speed, cache state or machine load reaches both alike.

Before each turn the process sleeps ``settle_ms``, then makes one untimed run. After a run,
a runtime's idle worker threads keep spinning (onnxruntime's, by design, so that its next
run starts sooner); in the same process they take cores from the other runtime for as long
as that one keeps the machine busy: on a 2-core machine, onnxc's ResNet-50 at 2 threads took
126-144 ms right after onnxruntime runs and 88-90 ms after a 0.5 s pause or in a program of
its own. The pause lets the spinning stop, the untimed run brings caches and clocks back,
so each runtime is timed as it runs in a program of its own. Then come at least ``block``
timed runs lasting at least ``turn_ms`` together. ``block=1, settle_ms=0, turn_ms=0`` times
strict A B A B instead."""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from onnxc.runtime.loader import read_manifest

from .sessions import onnxc_session, ort_session, written_graph_outputs

RTOL, ATOL = 1e-3, 1e-4  # outputs of the two runtimes must agree before their times mean anything
# onnxc in bf16 precision against onnxruntime's float32: each output within this fraction of its
# largest magnitude (bfloat16 keeps 8 significant bits; a broken kernel is far off). The
# accuracy itself is recorded: the largest absolute difference and that relative measure.
BF16_REL_TOL = 0.05


@dataclasses.dataclass(frozen=True)
class TimingConfig:
    """How long to measure. The run count adapts to the model: at least ``min_runs`` timed
    runs and at least ``min_seconds`` of runs per runtime, at most ``max_runs``."""
    warmup: int = 5
    min_runs: int = 10
    min_seconds: float = 1.5
    max_runs: int = 20000
    block: int = 3          # timed runs per turn, at least
    settle_ms: float = 200  # pause before each turn, then one untimed run (0: neither)
    turn_ms: float = 300    # timed runs per turn last at least this long


FULL = TimingConfig()
SMOKE = TimingConfig(warmup=2, min_runs=5, min_seconds=0.05, max_runs=200, settle_ms=20, turn_ms=20)


# --- sessions ---------------------------------------------------------------------------------------------

def timed(make: Callable[[], Any]) -> tuple[Any, float]:
    """``make()`` and the seconds it took."""
    start = time.perf_counter_ns()
    value = make()
    return value, (time.perf_counter_ns() - start) / 1e9


@dataclasses.dataclass
class OnnxcStart:
    """An onnxc session and what starting it cost."""
    session: Any
    compile_s: float        # first session, cold cache: frontend, passes, C compiler
    cached_load_ms: float   # second session: the artifact from the cache
    arena_bytes: int        # the planned intermediate arena (the artifact's manifest)


def start_onnxc(model_path: str, threads: int, precision: str = "fp32") -> OnnxcStart:
    """Compiles on the (cold, private) cache, then opens a second session that loads the cached
    artifact: the first time is what a user waits once, the second every later start."""
    first, compile_s = timed(lambda: onnxc_session(model_path, threads, precision))
    del first  # the second session loads the same artifact; one resident copy is enough
    session, load_s = timed(lambda: onnxc_session(model_path, threads, precision))
    manifest = read_manifest(session.artifact_dir)
    return OnnxcStart(session, compile_s, load_s * 1e3, int(manifest.get("arena_bytes", 0)))


# --- timing -----------------------------------------------------------------------------------------------

def run_count(warmup_ns: list[int], warmup_ns_other: list[int], config: TimingConfig) -> int:
    """Timed runs so that each runtime gets at least ``min_seconds`` (estimated from the
    warm-up runs after the first, which pays for first-touch costs)."""
    estimates = [float(np.median(t[1:] if len(t) > 1 else t)) for t in (warmup_ns, warmup_ns_other)]
    fastest = max(min(estimates), 1.0)
    wanted = math.ceil(config.min_seconds * 1e9 / fastest)
    return int(min(max(config.min_runs, wanted), config.max_runs))


def interleaved(run_a: Callable[[], Any], run_b: Callable[[], Any],
                config: TimingConfig) -> tuple[np.ndarray, np.ndarray]:
    """Warm-up then timed runs in alternating turns; nanoseconds of each timed run of each."""
    strict = TimingConfig(block=1, settle_ms=0, turn_ms=0)
    warm_a, warm_b = _alternate(run_a, run_b, config.warmup, strict)
    runs = run_count(warm_a, warm_b, config)
    times_a, times_b = _alternate(run_a, run_b, runs, config)
    return np.array(times_a, np.int64), np.array(times_b, np.int64)


def _alternate(run_a: Callable[[], Any], run_b: Callable[[], Any], count: int,
               config: TimingConfig) -> tuple[list[int], list[int]]:
    """At least ``count`` timed runs of each, in turns: a pause of ``settle_ms`` and one
    untimed run (neither if settle_ms is 0), then at least ``block`` timed runs lasting at
    least ``turn_ms`` together."""
    times: tuple[list[int], list[int]] = ([], [])
    clock = time.perf_counter_ns
    turn_ns = int(config.turn_ms * 1e6)
    while len(times[0]) < count or len(times[1]) < count:
        for run, out in ((run_a, times[0]), (run_b, times[1])):
            if config.settle_ms > 0:
                time.sleep(config.settle_ms / 1e3)
                run()
            start = clock()
            done = 0
            while done < max(config.block, 1) or clock() - start < turn_ns:
                t0 = clock()
                run()
                out.append(clock() - t0)
                done += 1
    return times


def summary_ms(times_ns: np.ndarray) -> dict[str, float]:
    ms = times_ns / 1e6
    return {"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)), "min_ms": float(ms.min())}


# --- one model at one thread count ------------------------------------------------------------------------

def outputs_agree(actual: list[Any], expected: list[Any]) -> tuple[bool, float]:
    """Whether onnxc's outputs match onnxruntime's (rtol 1e-3, atol 1e-4), and the largest
    absolute difference: a fast but wrong result must not pass as a speed-up."""
    worst = 0.0
    ok = len(actual) == len(expected)
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape or a.dtype != e.dtype:
            return False, math.inf
        if e.size and e.dtype.kind in "fc":
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))))
        ok = ok and bool(np.allclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True))
    return ok, worst


def relative_difference(actual: list[Any], expected: list[Any]) -> float:
    """The largest difference of any float output, relative to that output's largest magnitude."""
    worst = 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        if e.size and a.shape == e.shape and e.dtype.kind in "fc":
            scale = float(np.max(np.abs(e))) or 1.0
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) / scale)
    return worst


def measure(model_path: str, feed: dict[str, np.ndarray], threads: int, config: TimingConfig,
            precision: str = "fp32") -> dict[str, Any]:
    """Sessions, output check and interleaved timing of one model at one thread count; onnxc's
    GEMMs in ``precision``, onnxruntime's in float32."""
    start = start_onnxc(model_path, threads, precision)
    ours = start.session
    reference, create_s = timed(lambda: ort_session(model_path, threads))
    actual, expected = ours.run(None, feed), reference.run(None, feed)
    match, max_abs_diff = outputs_agree(actual, expected)
    max_rel_diff = relative_difference(actual, expected)
    matched = "onnxruntime"
    if precision != "fp32":
        match = len(actual) == len(expected) and max_rel_diff <= BF16_REL_TOL
    elif not match:
        written = written_graph_outputs(model_path, threads, feed)
        agree, written_abs = outputs_agree(actual, written)
        if agree:
            match, max_abs_diff, matched = True, written_abs, "onnxruntime, graph as written"
            max_rel_diff = relative_difference(actual, written)
    times_onnxc, times_ort = interleaved(lambda: ours.run(None, feed), lambda: reference.run(None, feed), config)
    onnxc_stats, ort_stats = summary_ms(times_onnxc), summary_ms(times_ort)
    return {
        "threads": threads, "runs": len(times_onnxc),
        "onnxc": onnxc_stats, "onnxruntime": ort_stats,
        "ratio": onnxc_stats["median_ms"] / ort_stats["median_ms"],
        "onnxc_compile_s": start.compile_s, "onnxc_cached_load_ms": start.cached_load_ms,
        "onnxruntime_create_ms": create_s * 1e3, "arena_bytes": start.arena_bytes,
        "outputs_match": match, "max_abs_diff": max_abs_diff, "max_rel_diff": max_rel_diff,
        "reference": matched, "precision": precision,
    }


def accuracy(model_path: str, feed: dict[str, np.ndarray], threads: int, precision: str) -> dict[str, float]:
    """The largest absolute and relative difference of onnxc's outputs in ``precision`` from
    onnxruntime's float32 ones, untimed."""
    actual = onnxc_session(model_path, threads, precision).run(None, feed)
    expected = ort_session(model_path, threads).run(None, feed)
    return {"max_abs_diff": outputs_agree(actual, expected)[1], "max_rel_diff": relative_difference(actual, expected)}


def geometric_mean(values: list[float]) -> float:
    return float(math.exp(sum(math.log(v) for v in values) / len(values))) if values else math.nan
