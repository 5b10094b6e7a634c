"""InferenceSession API, feeds, symbolic dims, artifacts, cache and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import weakref

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model


def bias_relu_model():
    b = onnx.numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "bias")
    m = make_model([helper.make_node("Add", ["x", "bias"], ["t"], name="add"),
                    helper.make_node("Relu", ["t"], ["y"], name="relu")],
                   [("x", T.FLOAT, ["batch", 8])], [("y", T.FLOAT, ["batch", 8])], [b])
    m.producer_name = "tests"
    m.doc_string = "a bias and a relu"
    m.graph.name = "bias_relu"
    helper.set_model_props(m, {"author": "onnxc"})
    return m


def expected(x):
    return np.maximum(x + np.linspace(-1, 1, 8, dtype=np.float32), 0)


@pytest.fixture(scope="module")
def sess():
    return onnxc.InferenceSession(bias_relu_model().SerializeToString())


def test_run_and_introspection(sess):
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    y, = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, expected(x), rtol=1e-6)
    assert sess.run(["y"], {"x": x})[0].shape == (3, 8)
    (i,), (o,) = sess.get_inputs(), sess.get_outputs()
    assert (i.name, i.type, i.shape) == ("x", "tensor(float)", ["batch", 8])
    assert (o.name, o.type, o.shape) == ("y", "tensor(float)", ["batch", 8])
    meta = sess.get_modelmeta()
    assert meta.producer_name == "tests" and meta.graph_name == "bias_relu"
    assert meta.description == "a bias and a relu" and meta.custom_metadata_map == {"author": "onnxc"}
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_symbolic_batch_runs_at_many_sizes_without_recompiling(sess):
    lib = os.path.join(sess.artifact_dir, "libmodel.so")
    before = os.stat(lib).st_mtime_ns
    for n in (1, 7, 64, 0):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected(x), rtol=1e-6)
    assert os.stat(lib).st_mtime_ns == before


@pytest.mark.parametrize("feed, message", [
    ({}, "missing"),
    ({"x": np.zeros((2, 8), np.float32), "z": np.zeros(1)}, "Invalid input name: z"),
    ({"x": np.zeros((2, 8), np.float64)}, "Unexpected input data type"),
    ({"x": np.zeros((2, 8, 1), np.float32)}, "Invalid rank for input: x"),
    ({"x": np.zeros((2, 9), np.float32)}, "Got invalid dimensions for input: x"),
])
def test_bad_feeds_raise_clear_errors(sess, feed, message):
    with pytest.raises(onnxc.InvalidArgument, match=message):
        sess.run(None, feed)


def test_bad_output_name(sess):
    with pytest.raises(onnxc.InvalidArgument, match="Invalid output name"):
        sess.run(["nope"], {"x": np.zeros((1, 8), np.float32)})


def test_non_contiguous_and_readonly_inputs(sess):
    base = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    x = base.T  # (6, 8), not C-contiguous
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected(x), rtol=1e-6)
    ro = np.ascontiguousarray(x)
    ro.setflags(write=False)
    np.testing.assert_allclose(sess.run(None, {"x": ro})[0], expected(x), rtol=1e-6)


def test_shared_symbol_must_agree_across_inputs():
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                   [("a", T.FLOAT, ["n"]), ("b", T.FLOAT, ["n"])], [("y", T.FLOAT, ["n"])])
    s = onnxc.InferenceSession(m)
    with pytest.raises(onnxc.InvalidArgument, match="Dimension 'n'"):
        s.run(None, {"a": np.zeros(3, np.float32), "b": np.zeros(4, np.float32)})


def test_symbolic_broadcast_mismatch_is_a_runtime_error_not_a_crash():
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                   [("a", T.FLOAT, ["n"]), ("b", T.FLOAT, ["m"])], [("y", T.FLOAT, [None])])
    s = onnxc.InferenceSession(m)
    np.testing.assert_array_equal(s.run(None, {"a": np.ones(3, np.float32), "b": np.ones(1, np.float32)})[0],
                                  np.full(3, 2, np.float32))
    with pytest.raises(onnxc.RuntimeFailure, match="shapes do not fit"):
        s.run(None, {"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})


def test_unknown_provider_warns_and_falls_back():
    with pytest.warns(UserWarning, match="not in available provider names"):
        s = onnxc.InferenceSession(bias_relu_model(), providers=["NoSuchExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_session_options_reject_unknown_attributes():
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_DISABLE_ALL
    with pytest.raises(AttributeError):
        so.not_an_option = 1


def test_optimization_levels_compile_and_agree():
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    for level in onnxc.GraphOptimizationLevel:
        so = onnxc.SessionOptions()
        so.graph_optimization_level = level
        s = onnxc.InferenceSession(bias_relu_model(), so)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-6)


def test_cache_second_session_is_fast_and_tampering_forces_rebuild(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    data = bias_relu_model().SerializeToString()
    s1 = onnxc.InferenceSession(data)
    start = time.perf_counter()
    s2 = onnxc.InferenceSession(data)
    took = time.perf_counter() - start
    assert s2.artifact_dir == s1.artifact_dir
    assert took < 0.5, f"cached session took {took:.3f}s"
    assert oct(os.stat(tmp_path / "cache").st_mode & 0o777) == oct(0o700)
    with open(os.path.join(s1.artifact_dir, "libmodel.so"), "r+b") as f:
        f.seek(100)
        f.write(b"\0tampered\0")
    s3 = onnxc.InferenceSession(data)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(s3.run(None, {"x": x})[0], expected(x), rtol=1e-6)


def test_cached_model_file_is_not_rehashed_and_tampered_weights_are_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    w = onnx.numpy_helper.from_array(np.arange(1024, dtype=np.float32), "w")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [1024])],
                   [("y", T.FLOAT, [1024])], [w])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    folder = onnxc.InferenceSession(str(path)).artifact_dir
    start = time.perf_counter()
    onnxc.InferenceSession(str(path))
    assert time.perf_counter() - start < 0.05
    weights = os.path.join(folder, "weights.bin")
    raw = bytearray(open(weights, "rb").read())
    raw[0:4] = np.float32(1e6).tobytes()
    with open(weights, "wb") as f:
        f.write(raw)
    s = onnxc.InferenceSession(str(path))
    x = np.zeros(1024, np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.arange(1024, dtype=np.float32))


def test_cli_compile_then_load_artifact_without_compiling(tmp_path):
    model_path = tmp_path / "m.onnx"
    onnx.save(bias_relu_model(), model_path)
    out = tmp_path / "build" / "model"
    # (a cache of its own: the banner names the command that built the cached artifact)
    proc = subprocess.run([sys.executable, "-m", "onnxc", "compile", str(model_path), "-o", str(out)],
                          capture_output=True, text=True, env={**os.environ, "ONNXC_CACHE_DIR": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr
    for name in ("model.c", "model.h", "libmodel.so", "weights.bin", "manifest.json"):
        assert (out / name).exists(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == [{"name": "x", "dtype": "float", "shape": ["batch", 8], "kind": "tensor"}]
    source = (out / "model.c").read_text()
    assert "Command: onnxc compile" in source.splitlines()[1]
    assert "FusedElementwise 'relu' = Add 'add' -> Relu 'relu'" in source  # one loop, both named
    s = onnxc.InferenceSession(str(out))
    x = np.ones((4, 8), np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-6)
    proc = subprocess.run([sys.executable, "-m", "onnxc", "run", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0 and "y: tensor(float)" in proc.stdout


def test_cli_reports_errors_without_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    proc = subprocess.run([sys.executable, "-m", "onnxc", "compile", str(bad), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("onnxc: error:") and "Traceback" not in proc.stderr


def test_large_weights_live_in_the_weights_file_not_the_source(tmp_path):
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "w")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [256, 256])],
                   [("y", T.FLOAT, [256, 256])], [w])
    onnxc.compile_model(m, tmp_path)
    assert os.path.getsize(tmp_path / "weights.bin") >= 256 * 256 * 4
    assert os.path.getsize(tmp_path / "model.c") < 64 * 1024
    s = onnxc.InferenceSession(str(tmp_path))
    x = np.ones((256, 256), np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], x + onnx.numpy_helper.to_array(w), rtol=1e-6)


def test_scalar_inputs_and_outputs():
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], [("a", T.FLOAT, []), ("b", T.FLOAT, [])],
                   [("y", T.FLOAT, [])])
    s = onnxc.InferenceSession(m)
    y, = s.run(None, {"a": np.array(1.5, np.float32), "b": np.array(2.0, np.float32)})
    assert y.shape == () and y == np.float32(3.5)


def test_inner_dim_mismatch_is_checked_before_the_kernel_runs():
    # MatMul [n, k1] x [k2, m]: k1 == k2 is assumed by inference and checked at run time,
    # although neither appears in the output shape [n, m].
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [("a", T.FLOAT, ["n", "k1"]), ("b", T.FLOAT, ["k2", "m"])], [("y", T.FLOAT, ["n", "m"])])
    s = onnxc.InferenceSession(m)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_allclose(s.run(None, {"a": a, "b": b})[0], a @ b)
    with pytest.raises(onnxc.RuntimeFailure):
        s.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((5, 4), np.float32)})


def test_a_freshly_built_artifact_is_not_hashed_again_on_its_first_load(tmp_path, monkeypatch):
    """The build computed the weights' checksum from the bytes it wrote: loading the artifact
    right after (the second session of a process, the next process) hashes the library only."""
    from onnxc.runtime import cache
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    data = bias_relu_model().SerializeToString()
    onnxc.InferenceSession(data)
    hashed = []
    real = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda path: hashed.append(os.path.basename(path)) or real(path))
    onnxc.InferenceSession(data)
    assert hashed == ["libmodel.so"]


def test_a_process_with_spinning_openmp_threads_exits_cleanly(tmp_path):
    """With OMP_WAIT_POLICY=active the OpenMP workers spin after each parallel region; the
    session is collected and the process exits while they do. Unloading the OpenMP runtime
    with the model library crashed such a process (SIGSEGV) before it was kept loaded."""
    w = np.random.default_rng(0).standard_normal((48, 32, 3, 3)).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       [("x", T.FLOAT, [1, 32, 40, 40])], [("y", T.FLOAT, [1, 48, 40, 40])],
                       [helper.make_tensor("w", T.FLOAT, w.shape, w.ravel())])
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    script = (
        "import gc, sys, numpy as np, onnxc\n"
        "so = onnxc.SessionOptions(); so.intra_op_num_threads = 2\n"
        "s = onnxc.InferenceSession(sys.argv[1], so)\n"
        "x = np.ones((1, 32, 40, 40), np.float32)\n"
        "for _ in range(20): s.run(None, {'x': x})\n"
        "del s; gc.collect()\n")
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}   # (this process's loader set it)
    env["OMP_WAIT_POLICY"] = "active"
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_static_shaped_outputs_are_fresh_arrays_the_model_writes_in_place():
    """With static shapes, run() hands the model numpy arrays to write its outputs into:
    each run's results are new arrays of their own, the same output twice is two arrays,
    and an empty output still comes back with its shape."""
    b = onnx.numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "bias")
    m = make_model([helper.make_node("Add", ["x", "bias"], ["t"], name="add"),
                    helper.make_node("Relu", ["t"], ["y"], name="relu"),
                    helper.make_node("Slice", ["x", "zero", "zero", "one"], ["empty"], name="slice")],
                   [("x", T.FLOAT, [2, 8])], [("y", T.FLOAT, [2, 8]), ("t", T.FLOAT, [2, 8]),
                                               ("empty", T.FLOAT, [0, 8])],
                   [b, onnx.numpy_helper.from_array(np.array([0], np.int64), "zero"),
                    onnx.numpy_helper.from_array(np.array([0], np.int64), "one")])
    sess = onnxc.InferenceSession(m.SerializeToString())
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(3):
        x = rng.standard_normal((2, 8)).astype(np.float32)
        runs.append((x, sess.run(None, {"x": x})))
    for x, (y, t, empty) in runs:  # earlier results are not written over by later runs
        np.testing.assert_allclose(t, x + np.linspace(-1, 1, 8, dtype=np.float32), rtol=1e-6)
        np.testing.assert_allclose(y, np.maximum(t, 0), rtol=1e-6)
        assert empty.shape == (0, 8) and empty.dtype == np.float32
        assert y.flags.owndata and y.flags.writeable and not np.shares_memory(y, t)
    assert not np.shares_memory(runs[0][1][0], runs[1][1][0])


def test_an_output_array_nobody_holds_is_written_again():
    """A static-shaped output array the caller dropped is reused by the next run (a fresh
    array of megabytes would be page-faulted in as the model writes it); one the caller still
    holds, or holds a view or a weak reference of, is never written over."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", T.FLOAT, [256, 1024])],
                   [("y", T.FLOAT, [256, 1024])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((256, 1024)).astype(np.float32) for _ in range(6)]

    def address(a):
        return a.__array_interface__["data"][0]

    y = sess.run(None, {"x": feeds[0]})[0]
    first = address(y)
    del y
    y = sess.run(None, {"x": feeds[1]})[0]
    assert address(y) == first                                  # dropped: written again
    view = y[3:5]
    del y
    y = sess.run(None, {"x": feeds[2]})[0]
    assert address(y) != first                                  # a view held: a new array
    np.testing.assert_array_equal(view, np.maximum(feeds[1][3:5], 0))
    ref = weakref.ref(y)
    second = address(y)
    del y
    y = sess.run(None, {"x": feeds[3]})[0]
    assert address(y) != second and ref() is None               # weakly held: released, not written
    held = [sess.run(None, {"x": x})[0] for x in feeds[4:]]      # held: never written over
    for x, out in zip(feeds[4:], held):
        np.testing.assert_array_equal(out, np.maximum(x, 0))


# --- onnxruntime's exception classes ------------------------------------------------------------

def test_status_exceptions_are_onnxruntimes_classes():
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    from onnxc.capi import onnxruntime_pybind11_state as state
    ort_names = {n for n in dir(ort_state) if isinstance(getattr(ort_state, n), type)
                 and issubclass(getattr(ort_state, n), Exception)}
    ours = {n for n in dir(state) if isinstance(getattr(state, n), type) and issubclass(getattr(state, n), Exception)}
    assert ort_names <= ours
    errors = onnxc.compiler.errors
    for error, status, builtin in [
            (onnxc.ModelError, state.InvalidGraph, ValueError), (onnxc.ShapeError, state.InvalidGraph, ValueError),
            (onnxc.InvalidArgument, state.InvalidArgument, ValueError),
            (onnxc.UnsupportedError, state.NotImplemented, NotImplementedError),
            (onnxc.CompileError, state.Fail, RuntimeError), (onnxc.RuntimeFailure, state.RuntimeException, RuntimeError),
            (onnxc.RuntimeFailure, state.Fail, RuntimeError),
            (errors.ModelNotFound, state.NoSuchFile, FileNotFoundError),
            (errors.ModelParseError, state.InvalidProtobuf, ValueError)]:
        assert issubclass(error, status) and issubclass(error, builtin) and issubclass(error, onnxc.OnnxcError)


@pytest.mark.parametrize("source, status", [("missing.onnx", "NoSuchFile"), (b"\x08\x07garbage\xff\xff", "InvalidProtobuf")])
def test_load_failures_raise_the_status_onnxruntime_raises(tmp_path, source, status):
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    from onnxc.capi import onnxruntime_pybind11_state as state
    if isinstance(source, str):
        source = str(tmp_path / source)
    with pytest.raises(getattr(ort_state, status)):
        ort.InferenceSession(source)
    with pytest.raises(getattr(state, status)):
        onnxc.InferenceSession(source)


def test_terminated_run_is_onnxruntimes_fail(sess):
    from onnxc.capi.onnxruntime_pybind11_state import Fail
    options = onnxc.RunOptions()
    options.terminate = True
    with pytest.raises(Fail, match="terminate"):
        sess.run(None, {"x": np.zeros((1, 8), np.float32)}, options)


# --- dims the model leaves unnamed ----------------------------------------------------------------

def unnamed_dim_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [None, "n", 3])],
                      [("y", T.FLOAT, [None, "n", 3])])


def test_unnamed_dims_are_none_as_in_onnxruntime():
    import onnxruntime as ort
    model = unnamed_dim_model().SerializeToString()
    ours, theirs = onnxc.InferenceSession(model), ort.InferenceSession(model)
    for get in ("get_inputs", "get_outputs"):
        assert [a.shape for a in getattr(ours, get)()] == [a.shape for a in getattr(theirs, get)()] == [[None, "n", 3]]
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], np.maximum(x, 0))


def test_unnamed_dims_keep_their_cli_names(tmp_path, capsys):
    """The CLI names an unnamed dim ``<input>_dim<axis>``: --dim sets it in random inputs and
    fixes it at compile time."""
    from onnxc import cli
    path = str(tmp_path / "m.onnx")
    onnx.save(unnamed_dim_model(), path)
    assert cli.main(["run", path, "--dim", "x_dim0=5", "--dim", "n=2"]) == 0
    assert "x: float[5, 2, 3] random" in capsys.readouterr().out
    assert cli.main(["compile", path, "--dim", "x_dim0=6", "-o", str(tmp_path / "art"), "--quiet"]) == 0
    compiled = onnxc.InferenceSession(str(tmp_path / "art"))
    assert compiled.get_inputs()[0].shape == [6, "n", 3]


# --- onnxruntime's module-level functions -----------------------------------------------------------

def test_module_functions_answer_as_onnxruntime():
    import onnxruntime as ort
    assert onnxc.get_device() == ("GPU" if "CUDAExecutionProvider" in onnxc.get_available_providers() else "CPU")
    if onnxc.get_device() == "CPU":
        assert ort.get_device() == "CPU"
    assert onnxc.get_version_string() == onnxc.__version__ == onnxc.version
    assert onnxc.get_build_info().startswith("onnxc Build Info:")
    assert onnxc.has_collective_ops() is ort.has_collective_ops() is False
    for name in ("enable_telemetry_events", "disable_telemetry_events", "preload_dlls"):
        assert getattr(onnxc, name)() is None and getattr(ort, name) is not None


def test_set_seed_is_kept_for_random_operators():
    from onnxc.runtime import environment
    before = environment.seed()
    try:
        onnxc.set_seed(1234)
        assert environment.seed() == 1234
        with pytest.raises(onnxc.InvalidArgument):
            onnxc.set_seed(1.5)
    finally:
        environment._seed = before


def test_default_logger_verbosity_logs_compile_options(caplog):
    from onnxc.runtime import environment
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.set_default_logger_verbosity(-1)
    so = onnxc.SessionOptions()
    so.log_severity_level = 0
    try:
        onnxc.set_default_logger_verbosity(1)
        with caplog.at_level("DEBUG", logger="onnxc"):
            onnxc.InferenceSession(bias_relu_model().SerializeToString(), so)
        assert "compile options" in caplog.text
    finally:
        onnxc.set_default_logger_verbosity(0)
    caplog.clear()
    with caplog.at_level("DEBUG", logger="onnxc"):
        onnxc.InferenceSession(bias_relu_model().SerializeToString(), so)
    assert "compile options" not in caplog.text and environment.default_verbosity() == 0
