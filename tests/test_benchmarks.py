"""The benchmark harness (benchmarks/): its smoke mode end to end, and its model builders
(valid ONNX, onnxc agreeing with onnxruntime). The heavy models are checked at reduced size
or once (one light-zoo model), so this file stays within a few minutes on two cores."""
from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import sys
from types import ModuleType

import numpy as np
import onnx
import pytest

import onnxc
from helpers import run_ort


def _benchmarks_package() -> str:
    """The harness's package name: ``onnxc.benchmarks`` once installed under onnxc, else the
    repository's ``benchmarks`` folder, loaded from its path (the repository root is not put
    on sys.path, where its top-level folders would shadow other modules)."""
    try:
        importlib.import_module("onnxc.benchmarks")
        return "onnxc.benchmarks"
    except ModuleNotFoundError as e:
        if e.name != "onnxc.benchmarks":
            raise
    if "benchmarks" not in sys.modules:
        folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
        spec = importlib.util.spec_from_file_location("benchmarks", os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        package = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = package
        spec.loader.exec_module(package)
    return "benchmarks"


PACKAGE = _benchmarks_package()


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


cli, models, targets = _module("cli"), _module("models"), _module("targets")
QUICK = [m.name for m in models.MODELS if m.quick]


def _run_main(tmp_path, *args: str) -> dict:
    path = tmp_path / "bench.json"
    assert cli.main([*args, "--json", str(path)]) == 0
    return json.loads(path.read_text())


def _assert_timed(entry: dict) -> None:
    assert "error" not in entry, entry.get("error")
    for runtime in ("onnxc", "onnxruntime"):
        assert entry[runtime]["median_ms"] > 0
        assert entry[runtime]["p10_ms"] <= entry[runtime]["median_ms"] <= entry[runtime]["p90_ms"]
    assert math.isfinite(entry["ratio"]) and entry["ratio"] > 0
    assert entry["runs"] >= 5 and entry["onnxc_compile_s"] > 0 and entry["onnxc_cached_load_ms"] > 0
    assert entry["outputs_match"], f"max abs diff {entry['max_abs_diff']}"


def test_smoke_mode_times_every_quick_model(tmp_path):
    results = _run_main(tmp_path, "--smoke")
    assert results["config"]["smoke"] and results["config"]["threads"] == [1]
    assert sorted(results["models"]) == sorted(QUICK)
    for name in QUICK:
        _assert_timed(results["models"][name]["threads"]["1"])
    assert results["geomean"]["1"] > 0
    assert results["gemm"] and all(e["onnxc_gflops"] > 0 and e["numpy_gflops"] > 0 for e in results["gemm"])
    assert results["machine"]["usable_cores"] >= 1 and results["machine"]["onnxruntime"]
    assert {t["met"] for t in results["targets"]} <= {True, False, None}


def test_memory_probes_and_two_threads(tmp_path):
    results = _run_main(tmp_path, "--smoke", "--models", "mlp", "--threads", "1,2", "--memory", "--no-gemm")
    for threads in ("1", "2"):
        entry = results["models"]["mlp"]["threads"][threads]
        _assert_timed(entry)
        for runtime in ("onnxc", "onnxruntime"):
            probe = entry["memory"][runtime]
            assert "error" not in probe, probe.get("error")
            assert probe["baseline_rss_bytes"] > 0 and probe["peak_rss_delta_bytes"] >= 0
    assert "gemm" not in results


def test_a_memory_probe_that_has_to_compile_reports_an_error(tmp_path, monkeypatch):
    """The probe measures a cached artifact's session; compiling in the child would count the
    compiler's memory as the session's, so a cache miss must not give a number."""
    entry = next(m for m in models.MODELS if m.name == "mlp")
    model = entry.build()
    model_path, feed_path = tmp_path / "mlp.onnx", tmp_path / "feed.npz"
    onnx.save(model, str(model_path))
    np.savez(str(feed_path), **entry.feed(model))
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "empty-cache"))
    probe = _module("memory").measure("onnxc", str(model_path), str(feed_path), 1)
    assert "compiled the model" in probe.get("error", ""), probe


def test_smoke_defaults_and_overrides():
    smoke = cli.config_from(cli.parser().parse_args(["--smoke"]))
    assert smoke.threads == [1] and not smoke.memory and smoke.timing.min_runs < cli.harness.FULL.min_runs
    full = cli.config_from(cli.parser().parse_args(["--threads", "2,1", "--runs", "3", "--no-gemm"]))
    assert full.threads == [1, 2] and full.memory and full.timing.min_runs == 3 and full.gemm_shapes == []
    strict = cli.config_from(cli.parser().parse_args(["--block", "1", "--settle-ms", "0", "--turn-ms", "0"])).timing
    assert (full.timing.block, full.timing.settle_ms, full.timing.turn_ms) == (3, 200, 300)
    assert (strict.block, strict.settle_ms) == (1, 0)


@pytest.mark.parametrize("block, settle_ms, turn_ms", [(1, 0, 0), (3, 0, 0), (2, 1, 5)])
def test_turns_pause_then_time_a_block(block, settle_ms, turn_ms):
    harness = _module("harness")
    log: list[str] = []
    config = harness.TimingConfig(warmup=1, min_runs=4, min_seconds=0, block=block, settle_ms=settle_ms,
                                  turn_ms=turn_ms)
    times_a, times_b = harness.interleaved(lambda: log.append("a"), lambda: log.append("b"), config)
    runs = "".join(log[2:])   # after one warm-up run of each
    assert len(times_a) >= 4 and len(times_b) >= 4
    if settle_ms == 0:
        assert len(times_a) == len(times_b) and runs == ("a" * block + "b" * block) * (len(times_a) // block)
    else:  # each turn: one untimed run, then timed ones for at least 5 ms
        for name, times in (("a", times_a), ("b", times_b)):
            turns = len(re.findall(name + "+", runs))
            assert runs.count(name) == len(times) + turns and turns >= 1


def _fake_results(ratios: dict[str, float], gemm_fraction: float) -> dict:
    entries = {name: {"quick": name in QUICK, "threads": {"1": {"ratio": r, "outputs_match": True}}}
               for name, r in ratios.items()}
    log_mean = sum(math.log(r) for r in ratios.values()) / len(ratios)
    gemm = [{"m": 1024, "k": 1024, "n": 1024, "b": b, "threads": 1, "onnxc_over_numpy": gemm_fraction}
            for b in ("weight", "input")]
    return {"models": entries, "geomean": {"1": math.exp(log_mean)}, "gemm": gemm}


def test_targets_report_met_missed_and_unmeasured():
    met = {t["target"]: t["met"] for t in targets.evaluate(_fake_results({"mlp": 0.4, "bert_encoder": 0.8}, 0.9))}
    at_one = [m for t, m in met.items() if "at 1 thread" in t and "GEMM" not in t]
    assert at_one and all(at_one)
    assert all(m is None for t, m in met.items() if "at 2 threads" in t)
    missed = [t for t in targets.evaluate(_fake_results({"mlp": 0.6, "bert_encoder": 1.4}, 0.5)) if t["met"] is False]
    texts = " | ".join(t["target"] for t in missed)
    assert "under 1 ms" in texts and "no model above" in texts and "GEMM" in texts and "geometric" in texts


# --- the builders -------------------------------------------------------------------------------------------

BUILDERS = [(name, {}) for name in QUICK] + [
    ("bert_encoder", {"layers": 1}),   # the full 4 layers only repeat this one
    ("yolo_detector", {}),
    ("light_squeezenet", {}),          # one light-zoo model: the others take long to compile
]


def _build(name: str, kwargs: dict) -> tuple[onnx.ModelProto, dict]:
    entry = models.select([name])[0]
    if name == "bert_encoder":
        model = models.bert_encoder(**kwargs)
    else:
        model = entry.build()
    return model, entry.feed(model)


@pytest.mark.parametrize("name, kwargs", BUILDERS, ids=[b[0] for b in BUILDERS])
def test_builder_is_valid_and_onnxc_matches_onnxruntime(name, kwargs):
    model, feed = _build(name, kwargs)
    onnx.checker.check_model(model, full_check=True)
    initialized = {i.name for i in model.graph.initializer}
    assert not [i.name for i in model.graph.input if i.name in initialized], "initializers listed as inputs"
    assert all(np.all(np.isfinite(v)) for v in feed.values())
    expected = run_ort(model, feed)
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feed)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=1e-3, atol=1e-4)


def test_builders_are_deterministic():
    first, second = models.tiny_cnn(), models.tiny_cnn()
    assert first.SerializeToString() == second.SerializeToString()
    model = models.mlp()
    np.testing.assert_array_equal(models.random_feed(model)["x"], models.random_feed(model)["x"])


def test_compile_time_benchmark_times_each_stage(tmp_path, monkeypatch):
    """The compile-time benchmark's numbers for one small model: every stage, its units and
    memory; its idle-core estimate schedules units biggest first."""
    import onnx
    from onnx import TensorProto, helper

    from onnxc.benchmarks import compile_time
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]))
    path = str(tmp_path / "tanh.onnx")
    onnx.save(model, path)
    r = compile_time.compile_once(path, one_unit=False, threads=1)
    assert list(r["seconds"]) == list(compile_time.COLUMNS) and r["units"] == 1 and r["nodes"] == 1
    assert r["seconds"]["C compile"] > 0 and r["cc_cpu"] > 0 and r["rss_mib"] > 10
    assert r["total"] >= sum(r["seconds"].values()) - 1e-6
    assert compile_time.idle_makespan([1.0, 2.0, 2.0, 3.0], 2) == 4.0
    assert compile_time.idle_makespan([1.0, 2.0], 1) == 3.0
    assert "| tanh.onnx | 1 |" in compile_time.table([("tanh.onnx", r)])


def test_two_artifacts_of_a_model_are_timed_side_by_side(tmp_path, capsys):
    """The run-time check of a compiler change: two folders of the same model, interleaved, their
    outputs compared; a folder of another computation does not agree."""
    from onnx import TensorProto, helper

    from onnxc.benchmarks import artifacts
    from onnxc.benchmarks.harness import SMOKE

    def build(op: str, folder: str, threads: int) -> str:
        model = helper.make_model(helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])]))
        onnxc.compile_model(model, tmp_path / folder, onnxc.CompileOptions(threads=threads))
        return str(tmp_path / folder)
    old, new, other = build("Tanh", "old", 1), build("Tanh", "new", 2), build("Sigmoid", "other", 1)
    r = artifacts.compare(old, new, config=SMOKE)
    assert r["outputs_agree"] and r["runs"] >= SMOKE.min_runs and r["old_ms"] > 0 and r["new_ms"] > 0
    assert r["ratio"] == pytest.approx(r["new_ms"] / r["old_ms"])
    assert not artifacts.compare(old, other, threads=1, config=SMOKE)["outputs_agree"]
    feed = artifacts.random_feed(old)
    assert feed["x"].shape == (1, 64) and feed["x"].dtype == np.float32


# --- bf16 precision -----------------------------------------------------------------------------------------

def test_bf16_precision_times_against_float32_and_reports_the_accuracy(tmp_path):
    from onnxc import driver
    from onnxc.runtime import cpu
    results = _run_main(tmp_path, "--smoke", "--models", "tiny_cnn", "--precision", "bf16", "--no-gemm")
    assert results["config"]["precision"] == "bf16" and not results["config"]["memory"]
    entry = results["models"]["tiny_cnn"]["threads"]["1"]
    if not set(driver.BF16_FEATURES) <= (cpu.host_features() or frozenset()):
        assert "avx512_bf16" in entry["error"] or "avx512bw" in entry["error"]   # refused, and said so
        return
    _assert_timed(entry)   # (outputs_match: within harness.BF16_REL_TOL of the largest output)
    assert entry["precision"] == "bf16"
    # bfloat16's rounding shows, and stays within a few of its 2^-8 steps
    assert 0 < entry["max_rel_diff"] <= 0.05 and entry["max_abs_diff"] > 0


def test_logits_model_outputs_what_the_softmax_takes():
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32), "w")
    nodes = [onnx.helper.make_node("MatMul", ["x", "w"], ["logits"]),
             onnx.helper.make_node("Softmax", ["logits"], ["prob"], axis=-1)]
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "g", [value("x", onnx.TensorProto.FLOAT, [3, 8])],
                                   [value("prob", onnx.TensorProto.FLOAT, [3, 5])], [w])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    logits = models.logits_model(model)
    onnx.checker.check_model(logits)
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(run_ort(logits, {"x": x})[0], x @ onnx.numpy_helper.to_array(w), rtol=1e-5)
    assert [o.name for o in model.graph.output] == ["prob"]   # (the model itself unchanged)
    assert models.logits_model(logits) is None


class ShiftedSession:
    """A session whose outputs are another's plus 1 (as far from onnxc's as a fusion's rounding
    is made to seem): the output checks' second reference under test."""
    def __init__(self, session):
        self.session = session

    def run(self, names, feed):
        return [o + 1.0 for o in self.session.run(names, feed)]


@pytest.mark.parametrize("written_differs", [False, True])
def test_outputs_that_differ_from_the_optimized_session_are_checked_against_the_graph_as_written(
        tmp_path, monkeypatch, written_differs):
    """onnxruntime's optimized session may compute a quantized model otherwise than its graph
    says (its QDQ fusions round differently, by CPU): outputs that match the graph as written
    (no graph optimization) match, and the table says so; outputs that match neither do not."""
    harness, sessions, report = _module("harness"), _module("sessions"), _module("report")
    model = models.mlp((8, 4))
    path = str(tmp_path / "mlp.onnx")
    onnx.save(model, path)
    feed = models.random_feed(model)
    real = sessions.ort_session

    def session(path, threads, optimized=True):
        made = real(path, threads, optimized)
        return ShiftedSession(made) if optimized or written_differs else made

    monkeypatch.setattr(harness, "ort_session", session)
    monkeypatch.setattr(sessions, "ort_session", session)
    config = harness.TimingConfig(warmup=1, min_runs=3, min_seconds=0.0, block=1, settle_ms=0, turn_ms=0)
    entry = harness.measure(path, feed, 1, config)
    assert entry["outputs_match"] is not written_differs
    if written_differs:
        assert entry["max_abs_diff"] >= 0.99
    else:
        assert entry["reference"] == "onnxruntime, graph as written" and entry["max_abs_diff"] < 1e-4
        row = report._model_row("mlp", {"target_ratio": 1.3}, {**entry, "arena_bytes": 0})
        assert "graph as written" in row[4]
