"""One corpus model at one thread count: onnxc and onnxruntime side by side (the suite's
interleaved turns, see harness.py), the output check, the three thread measurements, the
OpenVINO anchor and, for a decoder, the time per generated token.

The thread measurements time each runtime three more ways, because a user's process is not a
benchmark loop with pauses:

- ``back_to_back``: runs one after another, as a batch job runs them;
- ``idle_30ms``: each run 30 ms after the runtime's previous one, as a server between requests
  (a pool whose workers went to sleep must wake them; one whose workers still spin need not);
- ``beside``: each run right after a run of a second onnxruntime session of the model, whose
  pool is still spinning in the same process (an application with another runtime, or numpy's
  BLAS, beside the model). Both runtimes are timed beside that same neighbour: onnxruntime's
  workers spin for tens of milliseconds after a run, so a runtime timed right after
  onnxruntime's run shares its cores with them, while one timed right after onnxc's run (whose
  workers sleep 0.1 ms after it) would not; the two are compared in the same place.

Each way runs in turns that alternate between the runtimes, a few runs a turn, and a turn
starts only once the other runtime's threads have stopped spinning: a virtual machine's speed
drifts by tens of percent within seconds (where its host puts the two vCPUs), so two runtimes
timed one after the other would be timed on different machines.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import harness
from ..sessions import ort_session, written_graph_outputs

RTOL = 1e-4           # of each output's largest magnitude: the bar for matching onnxruntime
IDLE_S = 0.030
MODE_MAX_RUNS = 200
PER_TOKEN_REPEATS = 3
Run = Callable[[], Any]


def compare(actual: list[Any], expected: list[Any]) -> dict[str, Any]:
    """Largest absolute and relative (to the output's largest magnitude) difference over the
    outputs; integer and bool outputs must be equal."""
    if len(actual) != len(expected):
        return {"outputs_match": False, "max_abs_diff": math.inf, "max_rel_diff": math.inf,
                "mismatch": f"{len(actual)} outputs, onnxruntime {len(expected)}"}
    worst_abs = worst_rel = 0.0
    problems = []
    for index, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape or a.dtype != e.dtype:
            problems.append(f"output {index}: {a.dtype}{list(a.shape)}, onnxruntime {e.dtype}{list(e.shape)}")
            continue
        if not e.size:
            continue
        if e.dtype.kind not in "fc":
            if not np.array_equal(a, e):
                problems.append(f"output {index}: {int(np.sum(a != e))} of {e.size} elements differ")
            continue
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        if np.any(np.isnan(diff) & ~(np.isnan(a) & np.isnan(e))):
            problems.append(f"output {index}: NaN where onnxruntime has none")
            continue
        largest = float(np.nanmax(diff)) if diff.size else 0.0
        scale = float(np.nanmax(np.abs(e.astype(np.float64)))) or 1.0
        worst_abs, worst_rel = max(worst_abs, largest), max(worst_rel, largest / scale)
    if worst_rel > RTOL:
        problems.append(f"relative difference {worst_rel:.3g} > {RTOL:g}")
    record = {"outputs_match": not problems, "max_abs_diff": worst_abs, "max_rel_diff": worst_rel}
    if problems:
        record["mismatch"] = "; ".join(problems)
    return record


# --- the three thread measurements ------------------------------------------------------------------------

def mode_runs(median_ms: float, timing: harness.TimingConfig) -> int:
    wanted = math.ceil(timing.min_seconds * 1e3 / max(median_ms, 1e-3))
    return int(max(timing.min_runs, min(wanted, MODE_MAX_RUNS)))


def _median_ms(times_ns: list[int]) -> float:
    return float(np.median(np.array(times_ns) / 1e6))


def _time(run: Run) -> int:
    start = time.perf_counter_ns()
    run()
    return time.perf_counter_ns() - start


def back_to_back(run: Run, runs: int, settle_ms: float) -> float:
    time.sleep(settle_ms / 1e3)
    run()
    return _median_ms([_time(run) for _ in range(runs)])


def wait_quiet(window_s: float = 0.004, most_s: float = 0.5) -> None:
    """Returns once the process has used under a quarter of a core over ``window_s`` (no pool
    thread spinning any more), or after ``most_s``."""
    deadline = time.perf_counter() + most_s
    while time.perf_counter() < deadline:
        cpu = time.process_time()
        time.sleep(window_s)
        if time.process_time() - cpu < window_s / 4:
            return


def _way_back_to_back(run: Run, other: Run, block: int) -> list[int]:
    run()
    return [_time(run) for _ in range(block)]


def _way_after_idle(run: Run, other: Run, block: int) -> list[int]:
    run()
    times = []
    for _ in range(block):
        time.sleep(IDLE_S)
        times.append(_time(run))
    return times


def _way_beside(run: Run, other: Run, block: int) -> list[int]:
    times = []
    for _ in range(block):
        other()
        times.append(_time(run))
    return times


WAYS = {"back_to_back": _way_back_to_back, "idle_30ms": _way_after_idle, "beside": _way_beside}


def thread_modes(runs: dict[str, Run], neighbour: Run, runs_count: int, block: int = 5) -> dict[str, dict[str, float]]:
    """Median ms of each runtime (``runs``: name -> run) in each way, the runtimes taking turns
    of ``block`` timed runs (see the module's docstring); ``neighbour`` runs a second
    onnxruntime session of the model."""
    result: dict[str, dict[str, float]] = {}
    for way, turn in WAYS.items():
        times: dict[str, list[int]] = {name: [] for name in runs}
        while min(len(t) for t in times.values()) < runs_count:
            for name, run in runs.items():
                wait_quiet()
                times[name] += turn(run, neighbour, block)
        result[way] = {name: _median_ms(t) for name, t in times.items()}
    return result


# --- OpenVINO ---------------------------------------------------------------------------------------------

def openvino(path: str, feed: dict[str, np.ndarray], threads: int, expected: list[Any], runs: int,
             settle_ms: float) -> dict[str, Any]:
    """OpenVINO's CPU plugin at FP32 precision, latency hint, the same thread count: run, check, time."""
    try:
        import openvino as ov
    except ImportError:
        return {"error": "openvino is not installed"}
    try:
        core = ov.Core()
        compiled = core.compile_model(core.read_model(path), "CPU",
                                      {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                                       "INFERENCE_NUM_THREADS": threads})
        request = compiled.create_infer_request()
        request.infer(feed)
        outputs = [np.array(request.get_output_tensor(i).data) for i in range(len(compiled.outputs))]
        check = compare(outputs, expected)
        median = back_to_back(lambda: request.infer(feed), runs, settle_ms)
    except Exception as e:  # noqa: BLE001 - reported in the table
        return {"error": one_line(e)}
    finally:
        time.sleep(settle_ms / 1e3)   # its pool winds down before anything else is timed
    return {"median_ms": median, **check}


# --- decoders: time per generated token -------------------------------------------------------------------

def generate(session: Any, ortvalue: Any, feed: dict[str, np.ndarray], tokens: np.ndarray) -> tuple[list[int], Any]:
    """Greedy-style generation of ``len(tokens)`` steps (the ids are given, so both runtimes take
    the same path): each step's present caches become the next step's past, bound through
    IOBinding as OrtValues without a copy. Returns each step's run time and the last logits."""
    outputs = [o.name for o in session.get_outputs()]
    past = {name: ortvalue.ortvalue_from_numpy(value) for name, value in feed.items() if name.startswith("past")}
    length = feed["attention_mask"].shape[1] - 1
    times, last = [], None
    for token in tokens:
        binding = session.io_binding()
        binding.bind_cpu_input("input_ids", np.array([[token]], np.int64))
        binding.bind_cpu_input("attention_mask", np.ones((1, length + 1), np.int64))
        binding.bind_cpu_input("position_ids", np.array([[length]], np.int64))
        for name, value in past.items():
            binding.bind_ortvalue_input(name, value)
        for name in outputs:
            binding.bind_output(name, "cpu")
        times.append(_time(lambda: session.run_with_iobinding(binding)))
        values = dict(zip(outputs, binding.get_outputs()))
        past = {name: values[name.replace("past_key_values", "present")] for name in past}
        last = values[outputs[0]].numpy()
        length += 1
    return times, last


def per_token(sessions: dict[str, tuple[Any, Any]], feed: dict[str, np.ndarray], steps: int,
              settle_ms: float) -> dict[str, Any]:
    """Median ms per generated token of each runtime (``sessions``: name -> (session, OrtValue
    class)), generations alternating between them, and the last step's logits compared."""
    tokens = np.random.default_rng(1).integers(0, 32000, steps)
    times: dict[str, list[int]] = {name: [] for name in sessions}
    last: dict[str, Any] = {}
    for _ in range(PER_TOKEN_REPEATS):
        for name, (session, ortvalue) in sessions.items():
            time.sleep(settle_ms / 1e3)
            step_times, last[name] = generate(session, ortvalue, feed, tokens)
            times[name] += step_times[1:]   # the first step of a generation pays for first touches
    record: dict[str, Any] = {"steps": steps, **{f"{n}_ms": _median_ms(t) for n, t in times.items()}}
    names = list(sessions)
    record.update({f"last_logits_{k}": v for k, v in compare([last[names[0]]], [last[names[1]]]).items()})
    return record


# --- one model at one thread count ------------------------------------------------------------------------

def measure(path: str, feed: dict[str, np.ndarray], threads: int, timing: harness.TimingConfig, *,
            modes: bool, with_openvino: bool, decoder_steps: int) -> dict[str, Any]:
    """Everything for one model at one thread count; a failure says which runtime and stage."""
    try:
        reference, create_s = harness.timed(lambda: ort_session(path, threads))
        expected = reference.run(None, feed)
    except Exception as e:  # noqa: BLE001
        return {"threads": threads, "error": f"onnxruntime: {one_line(e)}"}
    try:
        start = harness.start_onnxc(path, threads)
    except Exception as e:  # noqa: BLE001
        return {"threads": threads, "error": f"onnxc compile: {one_line(e)}"}
    ours = start.session
    try:
        actual = ours.run(None, feed)
    except Exception as e:  # noqa: BLE001
        return {"threads": threads, "error": f"onnxc run: {one_line(e)}", "onnxc_compile_s": start.compile_s}
    check = compare(actual, expected)
    if not check["outputs_match"]:
        # (the graph as written: sessions.written_graph_outputs)
        written = compare(actual, written_graph_outputs(path, threads, feed))
        if written["outputs_match"]:
            check = {**written, "reference": "onnxruntime, graph as written"}
    del actual
    run_onnxc, run_ort = (lambda: ours.run(None, feed)), (lambda: reference.run(None, feed))
    times_onnxc, times_ort = harness.interleaved(run_onnxc, run_ort, timing)
    onnxc_stats, ort_stats = harness.summary_ms(times_onnxc), harness.summary_ms(times_ort)
    result: dict[str, Any] = {
        "threads": threads, "runs": len(times_onnxc), "onnxc": onnxc_stats, "onnxruntime": ort_stats,
        "ratio": onnxc_stats["median_ms"] / ort_stats["median_ms"], **check,
        "onnxc_compile_s": start.compile_s, "onnxc_cached_load_ms": start.cached_load_ms,
        "onnxruntime_create_ms": create_s * 1e3, "arena_bytes": start.arena_bytes,
    }
    runs = mode_runs(ort_stats["median_ms"], timing)
    if modes:
        neighbour = ort_session(path, threads)
        result["modes"] = thread_modes({"onnxc": run_onnxc, "onnxruntime": run_ort},
                                       lambda: neighbour.run(None, feed), runs)
        del neighbour
    if decoder_steps:
        import onnxruntime

        import onnxc
        try:
            result["per_token"] = per_token({"onnxc": (ours, onnxc.OrtValue),
                                             "onnxruntime": (reference, onnxruntime.OrtValue)},
                                            feed, decoder_steps, timing.settle_ms)
        except Exception as e:  # noqa: BLE001
            result["per_token"] = {"error": one_line(e)}
    if with_openvino:
        result["openvino"] = openvino(path, feed, threads, expected, runs, timing.settle_ms)
    return result


def one_line(error: BaseException) -> str:
    """The error in one line, cut at 300 characters. OpenVINO's messages start with the source
    lines that raised them; those lines are left out."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    said = [line for line in lines if not re.match(r"(Exception from |Check '.*' failed at )\S+:\d+", line)]
    return f"{type(error).__name__}: {' | '.join(said or lines)[:300]}"
