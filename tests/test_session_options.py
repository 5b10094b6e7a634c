"""SessionOptions and InferenceSession keywords that change what is compiled, as in onnxruntime."""
from __future__ import annotations

import logging
import os
import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model


def batch_model():
    """y = relu(x) * 2 over [batch, 4], with the batch dim denoted DATA_BATCH."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    m = make_model(nodes, [("x", T.FLOAT, ["batch", 4])], [("y", T.FLOAT, ["batch", 4])])
    m.graph.input[0].type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    return m


@pytest.mark.parametrize("how", ["name", "denotation"])
def test_free_dimension_override_specialises_the_code(how):
    so = onnxc.SessionOptions()
    if how == "name":
        so.add_free_dimension_override_by_name("batch", 3)
    else:
        so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
    sess = onnxc.InferenceSession(batch_model().SerializeToString(), so)
    assert sess.get_inputs()[0].shape == [3, 4]
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0) * 2)
    with open(f"{sess.artifact_dir}/model.c") as f:
        assert "dim_batch" not in f.read()  # no symbol left: the size is a constant in the code
    with pytest.raises(onnxc.InvalidArgument, match="invalid dimensions"):
        sess.run(None, {"x": np.zeros((2, 4), np.float32)})


def test_free_dimension_override_of_an_unknown_name_warns(caplog):
    so = onnxc.SessionOptions()
    so.add_free_dimension_override_by_name("nope", 2)
    with caplog.at_level("WARNING", logger="onnxc"):
        sess = onnxc.InferenceSession(batch_model().SerializeToString(), so)
    assert "matches no input dim" in caplog.text
    assert sess.get_inputs()[0].shape == ["batch", 4]


def test_session_config_entries():
    so = onnxc.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.warns(UserWarning, match="not a known onnxruntime key"):
        so.add_session_config_entry("session.no_such_key", "1")
    with pytest.raises(onnxc.InvalidArgument):
        so.add_session_config_entry("session.load_model_format", "ORT")
    with pytest.raises(onnxc.InvalidArgument):
        so.get_session_config_entry("session.disable_prepacking")


def test_disabled_optimizers_skip_passes():
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"])]
    m = make_model(nodes, [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])])
    sess = onnxc.InferenceSession(m.SerializeToString(), disabled_optimizers=["EliminateIdentity"])
    x = np.array([-1, 0, 1, 2], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0))
    with open(f"{sess.artifact_dir}/model.c") as f:
        assert "Identity" in f.read()  # the identity node was kept
    with pytest.warns(UserWarning, match="not one onnxc has"):
        onnxc.InferenceSession(m.SerializeToString(), disabled_optimizers=["NoSuchFusion"])
    with pytest.warns(UserWarning, match="unknown keyword"):
        onnxc.InferenceSession(m.SerializeToString(), no_such_option=1)


def test_enums_have_onnxruntime_names():
    assert onnxc.GraphOptimizationLevel.ORT_ENABLE_EXTENDED == 2
    assert onnxc.ExecutionMode.ORT_PARALLEL == 1
    assert onnxc.ExecutionOrder.MEMORY_EFFICIENT == 2
    assert onnxc.SessionOptions().execution_order == onnxc.ExecutionOrder.DEFAULT


def test_errors_are_builtin_exceptions_too():
    assert issubclass(onnxc.ModelError, ValueError)
    assert issubclass(onnxc.ShapeError, ValueError)
    assert issubclass(onnxc.InvalidArgument, ValueError)
    assert issubclass(onnxc.UnsupportedError, NotImplementedError)
    assert issubclass(onnxc.CompileError, RuntimeError)
    assert issubclass(onnxc.RuntimeFailure, RuntimeError)
    with pytest.raises(ValueError):
        onnxc.InferenceSession(b"not a model")


def test_one_session_run_from_eight_threads():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])]
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    m = make_model(nodes, [("x", T.FLOAT, ["n", 16])], [("y", T.FLOAT, ["n", 16])],
                   [helper.make_tensor("w", T.FLOAT, [16, 16], w.reshape(-1))])
    sess = onnxc.InferenceSession(m.SerializeToString())
    feeds = [np.random.default_rng(i).standard_normal((i + 1, 16)).astype(np.float32) for i in range(8)]
    serial = [sess.run(None, {"x": x})[0] for x in feeds]
    results: dict[int, list] = {i: [] for i in range(8)}
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        for _ in range(25):
            results[i].append(sess.run(None, {"x": feeds[i]})[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):
        assert len(results[i]) == 25
        for r in results[i]:
            np.testing.assert_array_equal(r, serial[i])


def slow_model():
    """A loop of many small matmuls: long enough to be stopped half way."""
    body = helper.make_graph([helper.make_node("MatMul", ["s", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["s2"]),
                              helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("c", T.BOOL, []),
                              helper.make_tensor_value_info("s", T.FLOAT, [64, 64])],
                             [helper.make_tensor_value_info("c2", T.BOOL, []), helper.make_tensor_value_info("s2", T.FLOAT, [64, 64])])
    w = (np.random.default_rng(1).standard_normal((64, 64)) * 0.1).astype(np.float32)
    return make_model([helper.make_node("Loop", ["M", "", "s0"], ["y"], body=body)],
                      [("M", T.INT64, []), ("s0", T.FLOAT, [64, 64])], [("y", T.FLOAT, [64, 64])],
                      [helper.make_tensor("w", T.FLOAT, [64, 64], w.reshape(-1))])


def test_run_options_terminate_stops_a_run_from_another_thread():
    sess = onnxc.InferenceSession(slow_model().SerializeToString())
    feeds = {"M": np.array(10**7, np.int64), "s0": np.ones((64, 64), np.float32)}
    ro = onnxc.RunOptions()
    errors = []

    def run():
        try:
            sess.run(None, feeds, ro)
        except onnxc.RuntimeFailure as e:
            errors.append(str(e))

    t = threading.Thread(target=run)
    t.start()
    t.join(0.5)
    assert t.is_alive()          # still looping
    ro.terminate = True
    t.join(30)
    assert not t.is_alive() and errors and "terminated" in errors[0]
    with pytest.raises(onnxc.RuntimeFailure, match="terminate flag"):
        sess.run(None, feeds, ro)
    ro.terminate = False         # the same session and options run normally again
    out = sess.run(None, {"M": np.array(2, np.int64), "s0": np.ones((64, 64), np.float32)}, ro)[0]
    assert out.shape == (64, 64)


def test_profiling_writes_onnxruntime_style_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Relu", ["m"], ["y"], name="act")]
    w = np.ones((8, 4), np.float32)
    m = make_model(nodes, [("x", T.FLOAT, ["n", 8])], [("y", T.FLOAT, ["n", 4])],
                   [helper.make_tensor("w", T.FLOAT, [8, 4], w.reshape(-1))])
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC  # MatMul and Relu stay two nodes
    so.enable_profiling = True
    so.profile_file_prefix = "myprof"
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    assert sess.get_profiling_start_time_ns() > 0
    ro = onnxc.RunOptions()
    ro.run_tag = "first"
    sess.run(None, {"x": np.ones((3, 8), np.float32)}, ro)
    sess.run(None, {"x": np.ones((5, 8), np.float32)})
    name = sess.end_profiling()
    assert name.startswith("myprof_") and name.endswith(".json")
    import json
    events = json.loads((tmp_path / name).read_text())
    assert {e["ph"] for e in events} == {"X"}
    assert [e["name"] for e in events if e["cat"] == "Session"] == ["session_initialization", "model_run", "model_run"]
    runs = [e for e in events if e["name"] == "model_run"]
    assert runs[0]["args"] == {"run_tag": "first"}
    node_events = [e for e in events if e["cat"] == "Node"]
    assert [e["name"] for e in node_events] == ["mm_kernel_time", "act_kernel_time"] * 2
    mm = node_events[2]
    assert mm["args"]["op_name"] == "MatMul" and mm["args"]["provider"] == "CPUExecutionProvider"
    assert mm["args"]["input_type_shape"] == [{"float": [5, 8]}, {"float": [8, 4]}]
    assert mm["args"]["output_type_shape"] == [{"float": [5, 4]}]
    for e in node_events[:2]:  # node events lie inside their run
        assert runs[0]["ts"] <= e["ts"] and e["ts"] + e["dur"] <= runs[0]["ts"] + runs[0]["dur"] + 1
    assert sess.end_profiling() == ""  # already ended


def test_profiling_a_loop_records_its_body_nodes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    so = onnxc.SessionOptions()
    so.enable_profiling = True
    sess = onnxc.InferenceSession(slow_model().SerializeToString(), so)
    sess.run(None, {"M": np.array(3, np.int64), "s0": np.ones((64, 64), np.float32)})
    import json
    events = json.loads((tmp_path / sess.end_profiling()).read_text())
    ops = [e["args"]["op_name"] for e in events if e["cat"] == "Node"]
    # the body's MatMul -> Tanh is one fused kernel, run once per iteration
    assert ops.count("FusedMatMul") == 3 and ops.count("Loop") == 1 and len(ops) == 4


def test_logging_levels_follow_onnxruntime_severities(caplog):
    m = batch_model().SerializeToString()
    so = onnxc.SessionOptions()
    so.logid = "mine"
    so.log_severity_level = 1          # info
    with caplog.at_level(logging.DEBUG, logger="onnxc"):
        sess = onnxc.InferenceSession(m, so)
        assert any(r.name == "onnxc.session.mine" and "session ready" in r.message for r in caplog.records)
        caplog.clear()
        sess.run(None, {"x": np.ones((2, 4), np.float32)})
        assert not caplog.records        # run messages are verbose (0)
        ro = onnxc.RunOptions()
        ro.log_severity_level = 0
        ro.run_tag = "tagged"
        sess.run(None, {"x": np.ones((2, 4), np.float32)}, ro)
        assert any("run 'tagged' took" in r.message for r in caplog.records)
    quiet = onnxc.SessionOptions()
    quiet.log_severity_level = 3        # errors only
    with caplog.at_level(logging.DEBUG, logger="onnxc"):
        caplog.clear()
        onnxc.InferenceSession(m, quiet)
        assert not [r for r in caplog.records if r.name.startswith("onnxc.session")]


def _optimized_matches(model, feeds, tmp_path, level=onnxc.GraphOptimizationLevel.ORT_ENABLE_ALL):
    import onnx
    import onnxruntime as ort
    so = onnxc.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    saved = onnx.load(so.optimized_model_filepath)
    onnx.checker.check_model(saved, full_check=True)
    quiet = ort.SessionOptions()
    quiet.log_severity_level = 3
    original = ort.InferenceSession(model.SerializeToString(), quiet, providers=["CPUExecutionProvider"])
    reloaded = ort.InferenceSession(saved.SerializeToString(), quiet, providers=["CPUExecutionProvider"])
    want = original.run(None, feeds)
    for got in (reloaded.run(None, feeds), sess.run(None, feeds)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-6)
    return saved


def test_optimized_model_filepath_folds_and_reloads_in_onnxruntime(tmp_path):
    shape = helper.make_tensor("shape", T.INT64, [2], [-1, 4])
    nodes = [helper.make_node("Identity", ["w"], ["w2"]),
             helper.make_node("Mul", ["w2", "two"], ["w3"]),         # folds: constant inputs
             helper.make_node("MatMul", ["x", "w3"], ["m"]),
             helper.make_node("Reshape", ["m", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    w = np.arange(32, dtype=np.float32).reshape(8, 4) / 10
    m = make_model(nodes, [("x", T.FLOAT, ["n", 8])], [("y", T.FLOAT, ["n", 4])],
                   [helper.make_tensor("w", T.FLOAT, [8, 4], w.reshape(-1)), helper.make_tensor("two", T.FLOAT, [], [2.0]),
                    shape])
    saved = _optimized_matches(m, {"x": np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)}, tmp_path)
    assert [n.op_type for n in saved.graph.node] == ["MatMul", "Reshape", "Relu"]
    level0 = _optimized_matches(m, {"x": np.ones((2, 8), np.float32)}, tmp_path,
                                onnxc.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert "Mul" in [n.op_type for n in level0.graph.node]


def test_optimized_model_keeps_control_flow_bodies(tmp_path):
    from test_control_flow import loop_model
    feeds = {"M": np.array(3, np.int64), "x": np.ones((2, 3), np.float32), "acc0": np.zeros((2, 3), np.float32),
             "s0": np.ones(2, np.float32), "lim": np.array(10, np.float32)}
    saved = _optimized_matches(loop_model(), feeds, tmp_path)
    assert saved.graph.node[0].op_type == "Loop"


def test_add_initializer_compiles_the_given_value():
    nodes = [helper.make_node("Add", ["x", "b"], ["y"])]
    m = make_model(nodes, [("x", T.FLOAT, [3])], [("y", T.FLOAT, [3])],
                   [helper.make_tensor("b", T.FLOAT, [3], [1, 2, 3])])
    so = onnxc.SessionOptions()
    so.add_initializer("b", onnxc.OrtValue.ortvalue_from_numpy(np.array([10, 20, 30], np.float32)))
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones(3, np.float32)})[0], [11, 21, 31])
    plain = onnxc.InferenceSession(m.SerializeToString())      # not the cached one with other values
    np.testing.assert_array_equal(plain.run(None, {"x": np.ones(3, np.float32)})[0], [2, 3, 4])
    so2 = onnxc.SessionOptions()
    so2.add_external_initializers(["b"], [np.zeros(3, np.float32)])
    np.testing.assert_array_equal(onnxc.InferenceSession(m.SerializeToString(), so2)
                                  .run(None, {"x": np.ones(3, np.float32)})[0], [1, 1, 1])
    bad = onnxc.SessionOptions()
    bad.add_initializer("b", np.zeros(4, np.float32))
    with pytest.raises(onnxc.ModelError, match="initializer 'b'"):
        onnxc.InferenceSession(m.SerializeToString(), bad)


@pytest.mark.parametrize("field,value,check", [
    ("enable_mem_reuse", False, lambda c: "ARENA_PLANNED" in c),
    ("enable_cpu_mem_arena", False, lambda c: "#define ARENA_PLANNED 0 " in c),
    ("enable_mem_pattern", False, lambda c: "#define ARENA_PLANNED 0 " in c),
])
def test_memory_options_change_the_plan(field, value, check):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"]), helper.make_node("Neg", ["c"], ["y"])]
    m = make_model(nodes, [("x", T.FLOAT, [256])], [("y", T.FLOAT, [256])])
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC  # four nodes, not one fused loop
    setattr(so, field, value)
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -np.maximum(-np.maximum(x, 0), 0))
    code = open(f"{sess.artifact_dir}/model.c").read()
    assert check(code)
    basic = onnxc.SessionOptions()
    basic.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC
    default = open(f"{onnxc.InferenceSession(m.SerializeToString(), basic).artifact_dir}/model.c").read()
    planned = int(default.split("#define ARENA_PLANNED ")[1].split()[0])
    if field == "enable_mem_reuse":  # three intermediates, each with its own bytes (else written in place)
        assert int(code.split("#define ARENA_PLANNED ")[1].split()[0]) > planned


def test_env_set_providers_and_assignment_info(caplog):
    env = onnxc.Env(log_severity_level=onnxc.OrtLoggingLevel.ORT_LOGGING_LEVEL_INFO, log_id="shared")
    with caplog.at_level(logging.DEBUG, logger="onnxc"):
        sess = onnxc.InferenceSession(batch_model().SerializeToString(), env=env)
    assert any(r.name == "onnxc.session.shared" for r in caplog.records)
    with pytest.warns(UserWarning, match="not in available provider"):
        sess.set_providers(["CUDAExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(onnxc.InvalidArgument, match="record_ep_graph_assignment_info"):
        sess.get_provider_graph_assignment_info()
    so = onnxc.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    info = onnxc.InferenceSession(batch_model().SerializeToString(), so).get_provider_graph_assignment_info()
    assert [s.ep_name for s in info] == ["CPUExecutionProvider"]
    assert [n.op_type for n in info[0].get_nodes()] == ["Relu", "Add"]


def test_only_execute_path_to_fetches_runs_only_what_the_outputs_need():
    """With the option, asking for `cheap` does not run the failing branch that feeds `other`."""
    nodes = [helper.make_node("Relu", ["x"], ["cheap"]),
             helper.make_node("Gather", ["x", "idx"], ["other"], axis=0)]   # fails: index out of range
    m = make_model(nodes, [("x", T.FLOAT, [3]), ("idx", T.INT64, [1])], [("cheap", T.FLOAT, [3]),
                                                                         ("other", T.FLOAT, [1])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    feed = {"x": np.array([-1, 0, 2], np.float32), "idx": np.array([7], np.int64)}
    with pytest.raises(onnxc.RuntimeFailure):
        sess.run(["cheap"], feed)
    ro = onnxc.RunOptions()
    ro.only_execute_path_to_fetches = True
    np.testing.assert_array_equal(sess.run(["cheap"], feed, ro)[0], [0, 0, 2])


def test_intra_op_threads_build_parallel_code_with_the_same_results():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    k = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["t"]),
             helper.make_node("Reshape", ["t", "shape"], ["img"]),
             helper.make_node("Conv", ["img", "k"], ["y"], pads=[1, 1, 1, 1])]
    m = make_model(nodes, [("x", T.FLOAT, [512, 256])], [("y", T.FLOAT, [2, 16, 64, 128])],
                   [helper.make_tensor("w", T.FLOAT, [256, 256], w.reshape(-1)),
                    helper.make_tensor("k", T.FLOAT, [16, 8, 3, 3], k.reshape(-1)),
                    helper.make_tensor("shape", T.INT64, [4], [2, 8, 64, 128])])
    x = rng.standard_normal((512, 256)).astype(np.float32)
    one = onnxc.SessionOptions()
    one.intra_op_num_threads = 1
    serial = onnxc.InferenceSession(m.SerializeToString(), one)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 4
    parallel = onnxc.InferenceSession(m.SerializeToString(), so)
    assert "-fopenmp" in parallel._model.manifest["toolchain"] and "-fopenmp" not in serial._model.manifest["toolchain"]
    want = serial.run(None, {"x": x})[0]
    for _ in range(3):  # the tiles' sums do not depend on the thread count: bit for bit the same
        np.testing.assert_array_equal(parallel.run(None, {"x": x})[0], want)


def test_intra_op_threads_zero_means_one_per_usable_core():
    sess = onnxc.InferenceSession(batch_model().SerializeToString())
    cores = len(os.sched_getaffinity(0))
    assert sess._model.manifest["options"]["threads"] == cores
    assert ("-fopenmp" in sess._model.manifest["toolchain"]) == (cores > 1)


def test_parallel_execution_mode_runs_independent_nodes_together():
    """Four branches that do not depend on each other: ORT_PARALLEL builds run them in one
    parallel step, with the results of the sequential build."""
    rng = np.random.default_rng(9)
    nodes, inits, outs = [], [], []
    for b in range(4):
        w = rng.standard_normal((64, 64)).astype(np.float32)
        inits.append(helper.make_tensor(f"w{b}", T.FLOAT, [64, 64], w.reshape(-1)))
        nodes += [helper.make_node("MatMul", ["x", f"w{b}"], [f"m{b}"]), helper.make_node("Tanh", [f"m{b}"], [f"t{b}"])]
        outs.append(f"t{b}")
    nodes.append(helper.make_node("Sum", outs, ["y"]))
    m = make_model(nodes, [("x", T.FLOAT, ["n", 64])], [("y", T.FLOAT, ["n", 64])], inits)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    want = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    so = onnxc.SessionOptions()
    so.execution_mode = onnxc.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 2
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    code = open(f"{sess.artifact_dir}/model.c").read()
    assert "4 nodes that do not depend on each other, run together" in code
    for _ in range(5):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


def test_execution_orders_other_than_default_warn():
    so = onnxc.SessionOptions()
    so.execution_order = onnxc.ExecutionOrder.MEMORY_EFFICIENT
    with pytest.warns(UserWarning, match="topological order"):
        sess = onnxc.InferenceSession(batch_model().SerializeToString(), so)
    assert sess.run(None, {"x": np.ones((1, 4), np.float32)})[0].tolist() == [[2, 2, 2, 2]]


def test_an_artifact_loaded_with_other_threads_warns_and_reports_what_runs(tmp_path, monkeypatch):
    """An artifact folder built for one thread, opened by a session that asks for two: without
    a build for two in the cache it warns once with what differs, runs as built, and
    get_session_options() says one thread; once the cache has the model built for two, the
    same folder opens that build instead, without a warning."""
    import json
    import warnings

    from onnxc.driver import CompileOptions, compile_model
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    m = batch_model()
    folder = str(tmp_path / "one-thread")
    compile_model(m, folder, CompileOptions(threads=1))
    two = onnxc.SessionOptions()
    two.intra_op_num_threads = 2
    with pytest.warns(UserWarning, match=r"threads 1, not 2.*runs as built"):
        sess = onnxc.InferenceSession(folder, two)
    assert sess.get_session_options().intra_op_num_threads == 1 and two.intra_op_num_threads == 2
    assert sess.artifact_dir == folder
    x = np.ones((2, 4), np.float32)
    expected = sess.run(None, {"x": x})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onnxc.InferenceSession(folder, two)          # once per folder and difference
        onnxc.InferenceSession(m.SerializeToString(), two)   # the cache now builds it for two threads
        sess = onnxc.InferenceSession(folder, two)
    assert sess.artifact_dir != folder and sess.get_session_options().intra_op_num_threads == 2
    with open(os.path.join(sess.artifact_dir, "manifest.json")) as f:
        assert json.load(f)["options"]["threads"] == 2
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected[0], rtol=1e-6)


def test_a_first_compile_logs_before_the_c_compiler_starts(tmp_path, monkeypatch, caplog):
    """The first session of a model says it is compiling (a warning, shown by default) before
    the C compiler runs, and the stage times at INFO once it is done; a cached load says nothing."""
    import subprocess

    from onnxc.codegen import toolchain
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "batch.onnx")
    import onnx
    onnx.save(batch_model(), path)
    events = []
    real_popen = subprocess.Popen

    def popen(cmd, *args, **kwargs):
        if "-o" in cmd:     # a compile or link (not the compiler's version or macros)
            events.append("cc")
        return real_popen(cmd, *args, **kwargs)
    monkeypatch.setattr(toolchain.subprocess, "Popen", popen)

    class Events(logging.Handler):
        def emit(self, record):
            events.append((record.levelname, record.getMessage()))
    handler = Events()
    logging.getLogger("onnxc").addHandler(handler)
    try:
        so = onnxc.SessionOptions()
        so.log_severity_level = 1
        onnxc.InferenceSession(path, so)
        first = events.index(("WARNING", "compiling batch.onnx (first load; cached afterwards)"))
        assert first < events.index("cc")
        done = [e for e in events[first:] if e != "cc" and e[0] == "INFO" and e[1].startswith("compiled batch.onnx")]
        assert len(done) == 1 and "stages: load/check" in done[0][1] and "C compile" in done[0][1]
        assert events.index(done[0]) > len(events) - 1 - events[::-1].index("cc")
        events.clear()
        onnxc.InferenceSession(path, so)
        assert not [e for e in events if e == "cc" or e[1].startswith(("compiling", "compiled"))]
    finally:
        logging.getLogger("onnxc").removeHandler(handler)
