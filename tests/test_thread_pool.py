"""The thread pool of multi-threaded builds (templates/c/helpers/pool.c.j2): each context keeps
its own threads for its life and serves the kernels' OpenMP constructs itself, so no OpenMP
runtime is linked; a run whose pool threads cannot get a core still finishes, with the same
results, on the calling thread."""
from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from tools import missing, requires

HERE = os.path.dirname(os.path.abspath(__file__))


def _conv_gemm_model():
    """A Conv (parallel over output bands) into a MatMul (the parallel GEMM), both above the
    sizes at which their loops go parallel."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", T.FLOAT, [32, 16, 3, 3], rng.standard_normal((32, 16, 3, 3)).astype(np.float32).ravel())
    m = helper.make_tensor("m", T.FLOAT, [64, 256], rng.standard_normal((64, 256)).astype(np.float32).ravel())
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "m"], ["y"])]
    shape = helper.make_tensor("shape", T.INT64, [2], [-1, 64])
    return make_model(nodes, [("x", T.FLOAT, [1, 16, 64, 64])], [("y", T.FLOAT, [64 * 64 * 32 // 64, 256])], [w, m, shape])


FEED = {"x": np.random.default_rng(1).standard_normal((1, 16, 64, 64)).astype(np.float32)}


def _session(model, threads: int) -> onnxc.InferenceSession:
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    return onnxc.InferenceSession(model.SerializeToString(), so)


@requires(shutil.which("readelf") is not None, "readelf (binutils) reads the libraries a build needs")
def test_threaded_builds_link_no_openmp_runtime():
    sess = _session(_conv_gemm_model(), 2)
    library = os.path.join(sess.artifact_dir, "libmodel.so")
    needed = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout
    assert "NEEDED" in needed
    for runtime in ("libgomp", "libomp", "libiomp"):
        assert runtime not in needed, needed


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def _thread_ids() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def test_a_context_keeps_its_threads_for_its_life():
    """Its own threads, by id: other threads of the process (an earlier test's session that the
    garbage collector ends meanwhile) may come and go."""
    gc.collect()
    before = _thread_ids()
    sess = _session(_conv_gemm_model(), 3)
    sess.run(None, FEED)
    own = _thread_ids() - before
    assert len(own) >= 2   # a context of a 3-thread build: two pool threads beside the caller
    sess.run(None, FEED)
    assert _thread_ids() - before == own   # runs start no threads, and its threads stay
    del sess
    gc.collect()
    assert not own & _thread_ids()         # they end with it


def _small_model():
    """A node of PP-OCR's direction classifier's scale: a 3x3 convolution of 8 channels on 48 x 96
    (2.7M multiply-adds; the classifier's largest is 1.3M), then ReLU."""
    w = helper.make_tensor("w", T.FLOAT, [8, 8, 3, 3], np.random.default_rng(2).standard_normal(8 * 8 * 9).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, [("x", T.FLOAT, [1, 8, 48, 96])], [("y", T.FLOAT, [1, 8, 48, 96])], [w])


def _node_functions(source: str) -> list[str]:
    """The node functions of a generated model.c, each from its ONNXC_NODE line to its end."""
    return re.findall(r"^ONNXC_NODE .*?^}$", source, re.S | re.M)


def test_a_model_too_small_to_split_runs_on_the_calling_thread(monkeypatch):
    """Below session.onnxc.min_threaded_work (32M multiply-adds and elements by default, from
    static shapes: codegen/work.py) a 2-thread build starts no pool, has a 1-thread build's node
    functions (its kernels planned for one thread), gives a 1-thread build's results, and its manifest says why; above it (the conv-GEMM model,
    52M) the pool is there; the entry at 0 keeps the threads for any model, and a value that is
    not a count is refused."""
    monkeypatch.delenv("ONNXC_MIN_THREADED_WORK", raising=False)   # (the tests' default is 0)
    small = _small_model()
    x = {"x": np.random.default_rng(3).standard_normal((1, 8, 48, 96)).astype(np.float32)}
    sess = _session(small, 2)
    assert "every node runs on the calling thread" in sess._model.manifest["one_thread"]
    source = open(os.path.join(sess.artifact_dir, "model.c")).read()
    assert "ctx->pool = NULL;" in source
    # (every kernel planned as for one thread: the node functions a 1-thread build has)
    single = open(os.path.join(_session(small, 1).artifact_dir, "model.c")).read()
    assert _node_functions(source) == _node_functions(single)
    one = sess.run(None, x)[0]
    np.testing.assert_array_equal(one, _session(small, 1).run(None, x)[0])
    big = _session(_conv_gemm_model(), 2)
    big.run(None, FEED)
    assert "one_thread" not in big._model.manifest
    # Threads, counted around second sessions of the same builds (loaded from the cache: a
    # compile's own worker threads may still be ending meanwhile): none for the small model,
    # the pool's for the big one.
    gc.collect()
    before = _thread_ids()
    again = _session(small, 2)
    again.run(None, x)
    assert not _thread_ids() - before
    big_again = _session(_conv_gemm_model(), 2)
    big_again.run(None, FEED)
    assert _thread_ids() - before
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
    threaded = onnxc.InferenceSession(small.SerializeToString(), so)
    assert "one_thread" not in threaded._model.manifest
    np.testing.assert_array_equal(threaded.run(None, x)[0], sess.run(None, x)[0])
    so.add_session_config_entry("session.onnxc.min_threaded_work", "lots")
    with pytest.raises(onnxc.InvalidArgument, match="min_threaded_work"):
        onnxc.InferenceSession(small.SerializeToString(), so)


@pytest.mark.parametrize("rows, outputs, threaded", [(1, 512, True), (1, 256, False), (4, 512, False)])
def test_a_small_model_streaming_weights_through_a_matrix_vector_product_keeps_its_threads(monkeypatch, rows,
                                                                                           outputs, threaded):
    """A batch-1 MLP's first layer (784 x 512 weights: 0.4M multiply-adds, far under the 32M of
    session.onnxc.min_threaded_work) streams 1.6 MB of weights a run: two cores stream them
    faster than one and leave only a vector in each other's cache, so from 256K floats of
    weights (the GEMM's own threshold for such products) the model keeps its pool; a smaller
    product, or one of enough rows to reuse its weights, does not."""
    monkeypatch.delenv("ONNXC_MIN_THREADED_WORK", raising=False)
    rng = np.random.default_rng(4)
    w = helper.make_tensor("w", T.FLOAT, [784, outputs], rng.standard_normal(784 * outputs).astype(np.float32) * 0.05)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    model = make_model(nodes, [("x", T.FLOAT, [rows, 784])], [("y", T.FLOAT, [rows, outputs])], [w])
    sess = _session(model, 2)
    assert ("one_thread" not in sess._model.manifest) == threaded
    x = {"x": rng.standard_normal((rows, 784)).astype(np.float32)}
    np.testing.assert_allclose(sess.run(None, x)[0], _session(model, 1).run(None, x)[0], rtol=1e-5, atol=1e-5)


def test_results_do_not_depend_on_the_thread_count():
    model = _conv_gemm_model()
    expected = _session(model, 1).run(None, FEED)[0]
    for threads in (2, 3, 8):   # more threads than cores too: regions still finish, same sums
        np.testing.assert_array_equal(_session(model, threads).run(None, FEED)[0], expected)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_a_run_finishes_when_its_pool_threads_share_one_core():
    """All threads of the process on one core: the pool threads get the core only when the
    caller yields it, so the caller runs most thread numbers itself."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {HERE!r})
        import numpy as np
        from test_thread_pool import _conv_gemm_model, _session, FEED
        os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[0]}})
        model = _conv_gemm_model()
        expected = _session(model, 1).run(None, FEED)[0]
        sess = _session(model, 2)
        for _ in range(20):
            np.testing.assert_array_equal(sess.run(None, FEED)[0], expected)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=HERE)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_one_session_from_several_python_threads_on_a_threaded_build():
    import threading
    model = _conv_gemm_model()
    expected = _session(model, 1).run(None, FEED)[0]
    sess = _session(model, 2)
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(5):
                np.testing.assert_array_equal(sess.run(None, FEED)[0], expected)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=work) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors[0]


def test_a_split_build_shares_one_pool(monkeypatch, tmp_path):
    """Node functions compiled as several translation units: the parallel kernels in each call
    the one pool that model.c holds (one definition, so the link succeeds and no OpenMP runtime
    fills in), with the results of one thread."""
    from onnxc import driver
    from onnxc.codegen import units
    from onnxc.driver import CompileOptions, compile_model
    model = _conv_gemm_model()
    expected = _session(model, 1).run(None, FEED)[0]
    monkeypatch.setattr(units, "UNIT_BYTES", 1)
    monkeypatch.setattr(driver, "usable_cores", lambda: 3)
    compile_model(model, tmp_path, CompileOptions(threads=2))
    assert (tmp_path / "model_nodes_1.c").exists() and (tmp_path / "model_nodes_2.c").exists()
    if shutil.which("readelf"):
        needed = subprocess.run(["readelf", "-d", str(tmp_path / "libmodel.so")], capture_output=True, text=True).stdout
        assert "libgomp" not in needed
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    np.testing.assert_array_equal(onnxc.InferenceSession(str(tmp_path), so).run(None, FEED)[0], expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_and_releases_its_copy_of_a_session():
    """A process forked after a threaded session ran (a pre-forking server, multiprocessing's
    fork start method) has none of the pool's threads: its runs take the calling thread, give
    the same results, and releasing the session there joins nothing (no hang)."""
    script = textwrap.dedent(f"""
        import gc, os, sys
        sys.path.insert(0, {HERE!r})
        import numpy as np
        from test_thread_pool import _conv_gemm_model, _session, FEED
        sess = _session(_conv_gemm_model(), 2)
        expected = sess.run(None, FEED)[0]
        pid = os.fork()
        if pid == 0:
            ok = all(np.array_equal(sess.run(None, FEED)[0], expected) for _ in range(3))
            del sess
            gc.collect()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        np.testing.assert_array_equal(sess.run(None, FEED)[0], expected)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=HERE)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _runnable(tid: str) -> bool:
    """Whether this thread of the process is running or waiting for a core (not asleep)."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "R"


def _pool_awake_after_runs(allow_spinning: bool, pause_s: float) -> float:
    """Runs a 2-thread session with ``pause_s`` between runs, then returns the share of 20
    looks, a millisecond apart from 2 ms after the last run, that find its pool thread awake
    (spinning: running, or runnable while it yields its core to others) rather than asleep."""
    import time
    before = set(os.listdir("/proc/self/task"))
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    if not allow_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = onnxc.InferenceSession(_conv_gemm_model().SerializeToString(), so)
    sess.run(None, FEED)
    pool = set(os.listdir("/proc/self/task")) - before
    assert len(pool) == 1, "a 2-thread session has one pool thread"
    [tid] = pool
    for _ in range(4):
        time.sleep(pause_s)
        sess.run(None, FEED)
    time.sleep(0.002)
    looks = []
    for _ in range(20):
        looks.append(_runnable(tid))
        time.sleep(0.001)
    return sum(looks) / len(looks)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads the threads' states in /proc")
def test_the_pool_spins_through_pauses_like_the_last_ones_and_not_when_spinning_is_off():
    """Runs 20 ms apart (a server's requests): after a run the pool thread spins through the
    next such pause (30 ms), so the next run finds it awake; runs half a second apart: it
    sleeps right after the run; onnxruntime's allow_spinning = 0: it sleeps whenever it has no
    work, and the results are the same. (Awake or asleep, not its CPU time: a spinning thread
    yields its core to any other that wants it, so on a busy machine it gets little.)"""
    spun = _pool_awake_after_runs(True, 0.020)
    assert spun >= 0.75, f"the pool thread was awake in {spun:.0%} of the looks in the 22 ms after the run"
    slept = _pool_awake_after_runs(True, 0.5)
    assert slept <= 0.25, f"the pool thread was awake in {slept:.0%} of the looks after the run"
    off = _pool_awake_after_runs(False, 0.020)
    assert off <= 0.25, f"with spinning off the pool thread was awake in {off:.0%} of the looks after the run"
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    np.testing.assert_array_equal(onnxc.InferenceSession(_conv_gemm_model().SerializeToString(), so).run(None, FEED)[0],
                                  _session(_conv_gemm_model(), 1).run(None, FEED)[0])


def _last_cpu(tid: str) -> int:
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])   # (field 39, "processor")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or len(os.sched_getaffinity(0)) < 2,
                    reason="moves threads between CPUs: needs /proc and two CPUs to run on")
def test_a_woken_pool_thread_keeps_off_the_callers_cpu():
    """A pool thread asleep on the caller's CPU (where Linux puts it when the other vCPU of a
    virtual machine halted while the process idled) is moved off it when a run wakes it, and
    may run on all of the process's CPUs again afterwards."""
    import time
    cpus = os.sched_getaffinity(0)
    before = set(os.listdir("/proc/self/task"))
    sess = _session(_conv_gemm_model(), 2)
    sess.run(None, FEED)
    [tid] = set(os.listdir("/proc/self/task")) - before
    here = min(cpus)
    try:
        os.sched_setaffinity(0, {here})              # the caller (this thread) on one CPU
        time.sleep(0.3)                              # the pool thread falls asleep
        ran_on = []
        for _ in range(5):
            os.sched_setaffinity(int(tid), {here})   # asleep on the caller's CPU before each run
            sess.run(None, FEED)
            ran_on.append(_last_cpu(tid))            # where it ran last, read right after the run
            time.sleep(0.3)
        assert os.sched_getaffinity(int(tid)) == cpus, "the pool thread's CPUs are the process's again"
        # Once its CPUs are all the process's again, a thread spinning after the run may be moved
        # back to the caller's CPU while another process keeps the other one busy (a parallel
        # test run), so the test asks for one run of five seen elsewhere; left pinned, as it would
        # be without the move, it is on the caller's CPU after every run.
        assert any(cpu != here for cpu in ran_on), f"the woken pool thread ran on the caller's CPU after every run: {ran_on}"
    finally:
        os.sched_setaffinity(0, cpus)


@pytest.mark.parametrize("size, threaded", [(256, True), (128, False)])
def test_a_small_model_of_one_large_node_keeps_its_threads(monkeypatch, size, threaded):
    """One 256 x 256 x 256 MatMul (17M multiply-adds, under the default 32M) is a quarter of the
    threshold or more by itself: its split gains more than a neighbour could lose, and the model
    keeps its pool; a 128 x 128 x 128 one (2M) runs on the calling thread."""
    monkeypatch.delenv("ONNXC_MIN_THREADED_WORK", raising=False)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [("a", T.FLOAT, [size, size]), ("b", T.FLOAT, [size, size])], [("y", T.FLOAT, [size, size])])
    sess = _session(model, 2)
    assert ("one_thread" not in sess._model.manifest) == threaded
    rng = np.random.default_rng(5)
    feed = {"a": rng.standard_normal((size, size)).astype(np.float32),
            "b": rng.standard_normal((size, size)).astype(np.float32)}
    np.testing.assert_allclose(sess.run(None, feed)[0], feed["a"] @ feed["b"], rtol=1e-4, atol=1e-3)


def _small_recurrence_behind_an_if():
    """silero VAD's shape: an If on a flag, an LSTM (16 steps, 64 units: 0.4M multiply-adds) in
    one branch, the steps' mean twice over in the other."""
    rng = np.random.default_rng(6)
    w = helper.make_tensor("W", T.FLOAT, [1, 256, 32], (rng.standard_normal(256 * 32) * 0.1).astype(np.float32))
    r = helper.make_tensor("R", T.FLOAT, [1, 256, 64], (rng.standard_normal(256 * 64) * 0.1).astype(np.float32))
    lstm = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R"], ["", "h"], hidden_size=64),
                              helper.make_node("Reshape", ["h", "shape"], ["y_then"])], "then", [],
                             [helper.make_tensor_value_info("y_then", T.FLOAT, [1, 64])],
                             [w, r, helper.make_tensor("shape", T.INT64, [2], [1, 64])])
    other = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=0),
                               helper.make_node("Concat", ["m", "m"], ["y_else"], axis=1)], "else", [],
                              [helper.make_tensor_value_info("y_else", T.FLOAT, [1, 64])])
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=lstm, else_branch=other)]
    return make_model(nodes, [("x", T.FLOAT, [16, 1, 32]), ("flag", T.BOOL, [])], [("y", T.FLOAT, [1, 64])], [],
                      opset=17)


def test_a_small_recurrence_behind_an_if_runs_on_the_calling_thread(monkeypatch):
    """An LSTM's work is its steps' products (steps x directions x gates x units x (inputs +
    units)) and an If's the larger of its branches': a model of a small recurrence behind an If
    (silero VAD, 0.1 ms) is too small to split, and its 2-thread build gives the 1-thread
    build's results."""
    monkeypatch.delenv("ONNXC_MIN_THREADED_WORK", raising=False)
    model = _small_recurrence_behind_an_if()
    sess = _session(model, 2)
    assert "every node runs on the calling thread" in sess._model.manifest["one_thread"]
    one = _session(model, 1)
    rng = np.random.default_rng(7)
    for flag in (True, False):
        feed = {"x": rng.standard_normal((16, 1, 32)).astype(np.float32), "flag": np.array(flag)}
        np.testing.assert_array_equal(sess.run(None, feed)[0], one.run(None, feed)[0])


@requires(shutil.which("gcc") is not None, "gcc builds the pool's own test program")
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads the pool thread's state in /proc")
@pytest.mark.parametrize("sanitizer", ["none", "thread"])
def test_a_pool_whose_thread_loses_its_core_rests(sanitizer, tmp_path):
    """A neighbouring runtime's pool spinning after its run (three threads on two cores) takes a
    pool thread's core in the middle of its share, and its region waits a time slice for it.
    tests/c/pool_rest.c drives the pool's regions directly, with a thread number that sleeps
    in its share: one late region alone changes nothing; a second within the window, from a late
    pool thread or a late caller, makes the pool rest (every region's thread numbers on the
    caller, in turn; its thread asleep); it shares regions again once the rest is over, rests
    twice as long when late again right after, not when late only a window later, and halves
    the last rest after a run whose pool thread kept up, all through or once a rest at its
    start was over. Built plain and under ThreadSanitizer."""
    from onnxc.codegen import templates
    (tmp_path / "pool.h").write_text(templates.render("c/helpers/pool.c.j2", {"pool_threads": 2}))
    shutil.copy(os.path.join(HERE, "c", "pool_rest.c"), tmp_path / "pool_rest.c")
    # (a late share 30 ms late, far above what a loaded machine's scheduling delays: the test
    # runs beside other tests' processes, and a pool's rest starts from its own late regions)
    flags = ["-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-DONNXC_POOL_LATE_NS=30000000",
             "-DONNXC_POOL_LATE_WINDOW_NS=400000000", "-DONNXC_POOL_REST_MIN_NS=150000000",
             "-DONNXC_POOL_REST_MAX_NS=1200000000"]
    env = dict(os.environ)
    if sanitizer == "thread":
        libtsan = subprocess.run(["gcc", "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(libtsan):
            missing("gcc has no ThreadSanitizer runtime (libtsan)")
        flags += ["-fsanitize=thread", "-g"]
        env["TSAN_OPTIONS"] = "halt_on_error=1:exitcode=66"
    build = subprocess.run(["gcc", *flags, "pool_rest.c", "-o", "pool_rest", "-lpthread"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "pool_rest")], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout[-2000:] + out.stderr[-3000:]
