"""Load and soak: one session shared by many threads, long runs, many sessions.

Each test prints what it measured (runs, RSS growth, sessions) for the reliability notes.
The models are tiny so the full counts fit in CI: the point is the runtime around them.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from third_party import inputs as real_inputs
from test_benchmarks import PACKAGE
from third_party.wheels import model_bytes, wheel_folder

THREADS, RUNS_PER_THREAD = 8, 2000
LONG_RUNS, WARMUP_RUNS = 10_000, 1_000
SESSIONS = 500
RSS_BOUND = 2 << 20   # bytes of resident memory a soak may add once warm


def mlp(batch: object, seed: int = 0) -> onnx.ModelProto:
    """x[batch, 16] -> MatMul/Add/Tanh x2 -> MatMul/Add -> y[batch, 32], plus the indices of
    y's positive entries (NonZero: an output whose size depends on the values)."""
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "x"
    widths = [(16, 64), (64, 64), (64, 32)]
    for i, (k, n) in enumerate(widths):
        inits += [onnx.numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32) / 4, f"w{i}"),
                  onnx.numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) / 4, f"b{i}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"]),
                  helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"h{i}" if i < len(widths) - 1 else "y"])]
        if i < len(widths) - 1:
            nodes.append(helper.make_node("Tanh", [f"h{i}"], [f"t{i}"]))
            prev = f"t{i}"
    nodes.append(helper.make_node("NonZero", ["y"], ["positive"]))
    return make_model(nodes, [("x", T.FLOAT, [batch, 16])],
                      [("y", T.FLOAT, [batch, 32]), ("positive", T.INT64, [2, None])], inits)


def feeds(count: int, batches: list[int]) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"x": rng.standard_normal((batches[i % len(batches)], 16)).astype(np.float32)} for i in range(count)]


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled_rss() -> int:
    gc.collect()
    return rss()


@pytest.mark.parametrize("batch", [4, "batch"], ids=["static", "symbolic"])
def test_threads_sharing_one_session_get_the_serial_results_bit_for_bit(batch, capsys):
    """8 threads x 2,000 runs on one session, each thread cycling through the inputs from a
    different start: every result equals the serial run's, byte for byte. The static model
    takes the pooled fast path (outputs written in place), the symbolic one the general path
    (outputs the model allocates)."""
    sess = onnxc.InferenceSession(mlp(batch))
    inputs = feeds(16, [4] if batch == 4 else [1, 3, 4, 7, 16])
    serial = [[r.tobytes() for r in sess.run(None, f)] for f in inputs]
    mismatches, errors = [], []
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            start.wait()
            for k in range(RUNS_PER_THREAD):
                j = (t * 5 + k) % len(inputs)
                got = [r.tobytes() for r in sess.run(None, inputs[j])]
                if got != serial[j]:
                    mismatches.append((t, k, j))
        except BaseException as e:   # a thread's exception would otherwise only be printed
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    with capsys.disabled():
        print(f"\n[soak] batch {batch!r}: {THREADS} threads x {RUNS_PER_THREAD} runs = {THREADS * RUNS_PER_THREAD} "
              f"runs on one session, {len(mismatches)} differ from the serial results")
    assert not errors, errors[0]
    assert not mismatches, f"{len(mismatches)} results differ, first (thread, run, input): {mismatches[0]}"


def test_ten_thousand_runs_keep_resident_memory_flat(capsys):
    """Outputs of value-dependent size (NonZero) and of a symbolic batch come from the
    model's heap each run and are freed with their arrays: after a warm-up, 10,000 more runs
    (some 250 MB of outputs in all) leave the resident size within RSS_BOUND."""
    sess = onnxc.InferenceSession(mlp("batch"))
    inputs = feeds(32, [1, 8, 17, 64, 128])
    for k in range(WARMUP_RUNS):
        sess.run(None, inputs[k % len(inputs)])
    before = settled_rss()
    produced = 0
    for k in range(LONG_RUNS):
        y, positive = sess.run(None, inputs[k % len(inputs)])
        produced += y.nbytes + positive.nbytes
    growth = settled_rss() - before
    with capsys.disabled():
        print(f"\n[soak] {LONG_RUNS} runs after {WARMUP_RUNS} warm-up runs ({produced / 2**20:.1f} MiB of outputs): "
              f"RSS {before / 2**20:.1f} MiB -> grew {growth / 2**10:.0f} KiB (bound {RSS_BOUND >> 10} KiB)")
    assert growth < RSS_BOUND, f"resident memory grew {growth} bytes over {LONG_RUNS} runs"


def _library_maps(folder: str) -> int:
    with open("/proc/self/maps") as f:
        return sum(folder in line for line in f)


_SESSIONS_SCRIPT = """
import gc, json, os, sys
import numpy as np, onnxc

def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def maps(folder):
    with open("/proc/self/maps") as f:
        return sum(folder in line for line in f)

def state():
    return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")), rss()

data, sessions = open(sys.argv[1], "rb").read(), int(sys.argv[2])
x = {"x": np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)}
sess = onnxc.InferenceSession(data)
folder = sess.artifact_dir
mapped = maps(folder)
sess.run(None, x)
del sess
before = state()
unmapped = maps(folder)
for _ in range(sessions):
    sess = onnxc.InferenceSession(data)
    y, positive = sess.run(None, x)
    del sess, y, positive
after = state()
print(json.dumps({"mapped": mapped, "unmapped": unmapped, "before": before, "after": after, "maps": maps(folder)}))
"""


def test_five_hundred_sessions_created_and_destroyed_leak_nothing(capsys, tmp_path):
    """Each session maps the cached artifact's library and weights and makes contexts; when
    it goes, all of it goes: no file descriptors, no mapping of the artifact's files (the
    library is dlclosed), no threads and no resident memory left behind. In a process of its
    own: a pytest worker that has run thousands of tests moves its resident size by megabytes
    for reasons not the sessions'."""
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp(4).SerializeToString())
    onnxc.InferenceSession(path.read_bytes())   # (compiled here; the child loads it from the cache)
    proc = subprocess.run([sys.executable, "-c", _SESSIONS_SCRIPT, str(path), str(SESSIONS)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    (fds0, threads0, rss0), (fds, threads, memory) = got["before"], got["after"]
    with capsys.disabled():
        print(f"\n[soak] {SESSIONS} sessions created and destroyed: open fds {fds0} -> {fds}, threads "
              f"{threads0} -> {threads}, maps of the artifact {got['maps']}, RSS grew "
              f"{(memory - rss0) / 2**10:.0f} KiB (bound {RSS_BOUND >> 10} KiB)")
    assert got["mapped"] > 0
    assert got["unmapped"] == 0, "the library stays mapped after its session is gone"
    assert got["maps"] == 0, f"{got['maps']} mappings of the artifact remain"
    assert fds <= fds0, f"open file descriptors {fds0} -> {fds}"
    assert threads <= threads0, f"threads {threads0} -> {threads}"
    assert memory - rss0 < RSS_BOUND, f"resident memory grew {memory - rss0} bytes"


def test_outputs_outliving_their_session_stay_valid_and_free_after_it():
    """An output the model allocated is freed by the model's library: the library stays
    loaded until the last such output is gone, then unloads."""
    sess = onnxc.InferenceSession(mlp("batch"))
    folder = sess.artifact_dir
    x = feeds(1, [3])[0]
    y, positive = sess.run(None, x)
    expected = [y.copy(), positive.copy()]
    del sess
    gc.collect()
    assert _library_maps(folder) > 0, "the library went while an output it must free was alive"
    np.testing.assert_array_equal(y, expected[0])
    np.testing.assert_array_equal(positive, expected[1])
    del y, positive
    gc.collect()
    assert _library_maps(folder) == 0


def test_a_session_collected_in_a_reference_cycle_unloads_without_crashing(tmp_path):
    """When a session, its contexts and its outputs die together in a cycle, the GC runs
    finalizers before it frees anything: the library must still be loaded when the contexts
    and outputs are released, and unloaded after (in a child process: a crash is a failure)."""
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp("batch"), str(path))
    script = (
        "import gc, sys, numpy as np, onnxc\n"
        "gc.disable()\n"
        "s = onnxc.InferenceSession(sys.argv[1])\n"
        "folder = s.artifact_dir\n"
        "outputs = s.run(None, {'x': np.ones((3, 16), np.float32)})\n"
        "cycle = [s, outputs]\n"
        "cycle.append(cycle)\n"
        "del s, outputs, cycle\n"
        "assert any(folder in line for line in open('/proc/self/maps'))\n"
        "gc.collect()\n"
        "print(sum(folder in line for line in open('/proc/self/maps')))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "0", "the library stayed mapped after the cycle was collected"


# ---- a real model, threaded ----------------------------------------------------------------

# PaddleOCR's text direction classifier as rapidocr-onnxruntime ships it: a small MobileNet-style
# CNN (HardSigmoid, Clip, a MatMul head) that runs in about a millisecond, so 10,000 runs fit CI.
REAL_MODEL = {m.name: m.source for m in importlib.import_module(f"{PACKAGE}.corpus.registry").SHIPPED}["ppocr_cls"]
IDLE_S = float(os.environ.get("ONNXC_SOAK_IDLE_S", "60"))
CI_RUNS = 2_000   # CI's slice; `python -m pytest -m soak` runs LONG_RUNS


def soak_runs(config: pytest.Config) -> tuple[int, int]:
    """(warm-up runs, runs): the whole soak when -m names the suite, CI's slice otherwise."""
    named = "soak" in (config.option.markexpr or "")
    return (WARMUP_RUNS, LONG_RUNS) if named else (CI_RUNS // 10, CI_RUNS)


@pytest.fixture(scope="module")
def real_session(pytestconfig, tmp_path_factory):
    """The real model on 2 threads (the thread pool's workers take part in every run) and its
    inputs: text lines of two widths and two batch sizes."""
    data = model_bytes(REAL_MODEL, wheel_folder(pytestconfig, tmp_path_factory))
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxc.InferenceSession(data, so)
    rng = np.random.default_rng(7)
    feeds = [{"x": real_inputs.text_line(rng, batch, 48, width)} for batch, width in ((1, 192), (2, 96), (1, 320), (4, 192))]
    return sess, feeds


# The soak of the real model runs in a process of its own: resident memory is the process's,
# and a pytest worker that has run thousands of tests before (other sessions' pools, onnxruntime's
# threads, caches being trimmed) moves it by megabytes for reasons that are not this session's.
_SOAK_SCRIPT = """
import gc, json, os, sys, time
import numpy as np
import onnxc

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

model, inputs, warmup, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
so = onnxc.SessionOptions()
so.intra_op_num_threads = 2
sess = onnxc.InferenceSession(model, so)
with np.load(inputs) as held:
    feeds = [{"x": held[f"x{i}"]} for i in range(len(held.files))]
first = [[r.tobytes() for r in sess.run(None, f)] for f in feeds]
for k in range(warmup):
    sess.run(None, feeds[k % len(feeds)])
gc.collect()
before = rss()
checkpoints, differ = [], []
t0 = time.perf_counter()
for k in range(runs):
    j = k % len(feeds)
    if [r.tobytes() for r in sess.run(None, feeds[j])] != first[j]:
        differ.append((k, j))
    if (k + 1) % (runs // 4) == 0:
        gc.collect()
        checkpoints.append(rss() - before)
print(json.dumps({"before": before, "checkpoints": checkpoints, "differ": differ[:5], "differ_count": len(differ),
                  "took": time.perf_counter() - t0}))
"""


@pytest.mark.soak
@pytest.mark.ci_slice
def test_real_model_at_two_threads_ten_thousand_runs_bit_identical_and_flat(real_session, capsys, pytestconfig, tmp_path, tmp_path_factory):
    """10,000 runs of a real model on 2 threads after a warm-up (CI: 2,000), in a process of
    its own: every result equals the first run's for its input, byte for byte (the pool splits
    each kernel's work the same way every run, whichever thread takes which part), and resident
    memory stays within RSS_BOUND at each quarter of the runs."""
    sess, feeds = real_session    # (compiled here: the soak's process loads it from the cache)
    warmup, runs = soak_runs(pytestconfig)
    model, inputs = tmp_path / "model.onnx", tmp_path / "inputs.npz"
    model.write_bytes(model_bytes(REAL_MODEL, wheel_folder(pytestconfig, tmp_path_factory)))
    np.savez(inputs, **{f"x{i}": f["x"] for i, f in enumerate(feeds)})
    proc = subprocess.run([sys.executable, "-c", _SOAK_SCRIPT, str(model), str(inputs), str(warmup), str(runs)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    growth = max(got["checkpoints"])
    with capsys.disabled():
        print(f"\n[soak] {REAL_MODEL.member.rsplit('/', 1)[-1]}, 2 threads: {runs} runs after {warmup} warm-up runs "
              f"in {got['took']:.1f} s, {got['differ_count']} differ from the first results; RSS {got['before'] / 2**20:.1f} MiB, "
              f"growth at each quarter {[c >> 10 for c in got['checkpoints']]} KiB (bound {RSS_BOUND >> 10} KiB)")
    assert got["differ_count"] == 0, f"{got['differ_count']} of {runs} runs differ from the first run's results, first (run, input): {got['differ'][0]}"
    assert growth < RSS_BOUND, f"resident memory grew {growth} bytes over {runs} runs (at each quarter: {got['checkpoints']})"


def _fastest_run_s(sess: onnxc.InferenceSession, feed: dict[str, np.ndarray], runs: int = 60) -> float:
    """The fastest of `runs` runs: what the session can do, little moved by other processes
    taking the cores for part of the time (a median is: on a loaded machine it measures the load)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t0)
    return float(np.min(times))


@pytest.mark.soak
def test_real_model_idle_for_a_minute_then_runs_the_same(real_session, capsys):
    """A 2-thread session left idle for a minute (ONNXC_SOAK_IDLE_S) gives the same results,
    byte for byte, and runs as fast as before: its pool's workers sleep while idle and wake
    for the next run, neither lost nor slowed (the fastest of 60 runs within 1.5x of before's,
    a bound that a broken wake-up path, such as runs falling back to one thread or a worker
    that no longer answers, exceeds)."""
    sess, feeds = real_session
    before = [[r.tobytes() for r in sess.run(None, f)] for f in feeds]
    t_before = _fastest_run_s(sess, feeds[0])
    time.sleep(IDLE_S)
    after = [[r.tobytes() for r in sess.run(None, f)] for f in feeds]
    t_after = _fastest_run_s(sess, feeds[0])
    with capsys.disabled():
        print(f"\n[soak] idle {IDLE_S:.0f} s: fastest of 60 runs {t_before * 1e3:.3f} ms before, {t_after * 1e3:.3f} ms after; "
              f"results {'identical' if after == before else 'DIFFER'}")
    assert after == before, "results after the idle minute differ from those before it"
    assert t_after <= 1.5 * t_before, f"fastest run {t_after * 1e3:.3f} ms after idling, {t_before * 1e3:.3f} ms before"
