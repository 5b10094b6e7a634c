"""The real-world benchmark corpus (benchmarks/corpus/): its definitions are consistent, without
downloading a wheel or importing torch, and its measurement's parts work on small models
built here (the corpus's own files are fetched and exported only by `onnxc bench --corpus`)."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from test_benchmarks import PACKAGE, ShiftedSession

registry = importlib.import_module(f"{PACKAGE}.corpus.registry")
exports = importlib.import_module(f"{PACKAGE}.corpus.exports")
measure = importlib.import_module(f"{PACKAGE}.corpus.measure")
report = importlib.import_module(f"{PACKAGE}.corpus.report")
Wheel = importlib.import_module(f"{PACKAGE}.corpus.wheels").WheelMember
Quantized = importlib.import_module(f"{PACKAGE}.corpus.quantized").Quantized
BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_the_corpus_has_25_models_from_each_kind_of_source():
    kinds = [type(m.source).__name__ for m in registry.CORPUS]
    assert len(registry.CORPUS) >= 25
    assert {"WheelMember", "TorchExport", "Quantized"} <= set(kinds)
    names = [m.name for m in registry.CORPUS]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[a-z0-9_]+", n) for n in names)
    assert sum(m.decoder for m in registry.CORPUS) >= 1


def test_wheels_are_pinned_by_version_and_hash():
    hashes: dict[tuple[str, str], str] = {}
    for model in registry.CORPUS:
        if not isinstance(model.source, Wheel):
            continue
        wheel = model.source.wheel
        assert re.fullmatch(r"\d+(\.\d+)+", wheel.version), model.name
        assert re.fullmatch(r"[0-9a-f]{64}", wheel.sha256), model.name
        assert model.source.member.endswith(".onnx"), model.name
        assert hashes.setdefault((wheel.project, wheel.version), wheel.sha256) == wheel.sha256, wheel.project


def _torch_builders(module: str = "torch_models.py") -> set[str]:
    with open(os.path.join(BENCHMARKS, "corpus", module), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def test_exports_name_a_builder_and_their_feeds_fill_every_input():
    builders = _torch_builders()
    for model in registry.CORPUS:
        source = model.source.base if isinstance(model.source, Quantized) else model.source
        if isinstance(source, Wheel):
            continue
        arch = source.arch
        assert arch.builder in builders, model.name
        assert source.exporter in ("torchscript", "dynamo") and source.opset >= 17
        assert arch.library in ("torchvision", "transformers")
        named = set(arch.inputs) | set(arch.outputs)
        assert {name for name, _, _ in arch.dynamic} <= named, model.name
        assert sorted(model.make_feed()) == sorted(arch.inputs), model.name


def test_every_exported_architecture_has_a_tiny_version_for_the_tests():
    """tiny_exports.py exports tiny_models.<builder> for each exported corpus model (tests/third_party/models)."""
    assert {m.source.arch.builder for m in registry.EXPORTED} <= _torch_builders("tiny_models.py")


def test_quantized_models_come_from_corpus_exports():
    sources = {id(m.source) for m in registry.CORPUS}
    quantized = [m for m in registry.CORPUS if isinstance(m.source, Quantized)]
    assert {q.source.mode for q in quantized} == {"static", "dynamic"}
    assert all(id(q.source.base) in sources for q in quantized)


def test_feeds_are_seeded_arrays():
    for model in registry.CORPUS:
        first, second = model.make_feed(), model.make_feed()
        assert first and sorted(first) == sorted(second), model.name
        for name, array in first.items():
            assert isinstance(array, np.ndarray) and array.dtype in (np.float32, np.int64, np.int32), (model.name, name)
            assert np.array_equal(array, second[name]) and np.all(np.isfinite(array)), (model.name, name)


def test_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("ONNXC_CORPUS_DIR", str(tmp_path))
    assert registry.cache_dir() == str(tmp_path)
    monkeypatch.delenv("ONNXC_CORPUS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert registry.cache_dir() == str(tmp_path / "xdg" / "onnxc" / "corpus")
    export = next(m.source for m in registry.CORPUS if type(m.source).__name__ == "TorchExport")
    if importlib.util.find_spec("torch") is None:   # the tests never need torch: exports report it missing
        with pytest.raises(Exception, match="not installed"):
            export.path(str(tmp_path))
    else:   # keyed by the versions that export
        assert re.search(r"exports/torch-[^/]+_torchvision-[^/]+/", export.path(str(tmp_path)))


def test_the_readme_lists_every_corpus_model():
    with open(os.path.join(BENCHMARKS, "README.md"), encoding="utf-8") as f:
        text = f.read()
    for row in report.listing(registry.CORPUS)[2:]:
        assert row in text, f"benchmarks/README.md lacks (or has another) row: {row}"


def test_compare_holds_outputs_to_1e_4_of_their_largest_magnitude():
    expected = [np.array([100.0, 1.0], np.float32), np.array([3, 4])]
    assert measure.compare([np.array([100.005, 1.0], np.float32), np.array([3, 4])], expected)["outputs_match"]
    off = measure.compare([np.array([100.0, 1.02], np.float32), np.array([3, 4])], expected)
    assert not off["outputs_match"] and off["max_rel_diff"] == pytest.approx(2e-4, rel=1e-3)
    assert not measure.compare([expected[0], np.array([3, 5])], expected)["outputs_match"]
    assert not measure.compare(expected[:1], expected)["outputs_match"]


def _cache_decoder(path: str) -> None:
    """A stand-in decoder with a KV cache: present = past with the new token appended, logits
    from the cache's sum, the mask and position read (as a real decoder reads them)."""
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["token"], to=TensorProto.FLOAT),
        helper.make_node("Expand", ["token", "kv_shape"], ["new"]),
        helper.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "new"], ["present.0.value"], axis=2),
        helper.make_node("ReduceSum", ["present.0.key", "axes"], ["summed"], keepdims=0),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["mask"], ["length"], keepdims=1),
        helper.make_node("Cast", ["position_ids"], ["position"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["length", "position"], ["one"]),
        helper.make_node("Mul", ["summed", "one"], ["logits"]),
    ]
    cache = ["batch", 2, "past", 4]
    graph = helper.make_graph(
        nodes, "decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, 1]),
         helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, cache),
         helper.make_tensor_value_info("past_key_values.0.value", TensorProto.FLOAT, cache)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 2, 4]),
         helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, ["batch", 2, "total", 4]),
         helper.make_tensor_value_info("present.0.value", TensorProto.FLOAT, ["batch", 2, "total", 4])],
        [helper.make_tensor("kv_shape", TensorProto.INT64, [4], [1, 2, 1, 4]),
         helper.make_tensor("axes", TensorProto.INT64, [1], [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def test_per_token_generation_binds_the_caches_through_iobinding(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnxc
    path = str(tmp_path / "decoder.onnx")
    _cache_decoder(path)
    feed = {"input_ids": np.array([[5]], np.int64), "attention_mask": np.ones((1, 4), np.int64),
            "position_ids": np.array([[3]], np.int64),
            "past_key_values.0.key": np.ones((1, 2, 3, 4), np.float32),
            "past_key_values.0.value": np.zeros((1, 2, 3, 4), np.float32)}
    tokens = np.array([1, 2, 3])
    ours, last = measure.generate(onnxc.InferenceSession(path), onnxc.OrtValue, feed, tokens)
    theirs, reference = measure.generate(ort.InferenceSession(path, providers=["CPUExecutionProvider"]),
                                         ort.OrtValue, feed, tokens)
    assert len(ours) == len(theirs) == 3
    # the last step saw the 3 cached ones and the tokens 1, 2, 3: each key row sums to 3 + 6
    np.testing.assert_allclose(last, np.full((1, 2, 4), 9.0))
    np.testing.assert_array_equal(last, reference)


def test_measure_times_both_runtimes_in_every_way(tmp_path):
    pytest.importorskip("onnxruntime")
    harness = importlib.import_module(f"{PACKAGE}.harness")
    models = importlib.import_module(f"{PACKAGE}.models")
    entry = next(m for m in models.MODELS if m.name == "mlp")
    model = entry.build()
    path = str(tmp_path / "mlp.onnx")
    onnx.save(model, path)
    timing = harness.TimingConfig(warmup=1, min_runs=3, min_seconds=0.01, settle_ms=1, turn_ms=1)
    result = measure.measure(path, entry.feed(model), 1, timing, modes=True, with_openvino=False, decoder_steps=0)
    assert result["outputs_match"] and result["max_rel_diff"] <= measure.RTOL
    for way in ("back_to_back", "idle_30ms", "beside"):
        assert result["modes"][way]["onnxc"] > 0 and result["modes"][way]["onnxruntime"] > 0
    results = {"machine": {"cpu": "cpu", "simd": ["avx2"], "usable_cores": 2, "onnxc": "0", "onnxruntime": "1",
                           "numpy": "2", "toolchain": "cc|flags", "date": "today"},
               "config": {"threads": [1]}, "models": {"mlp": {"threads": {"1": result}},
                                                      "broken": {"error": "unavailable: no wheel", "threads": {}}},
               "geomean": {"1": result["ratio"]}, "command": "onnxc bench --corpus", "wall_s": 1.0}
    readme = tmp_path / "README.md"
    readme.write_text("# title\n\ntext\n")
    report.write_readme(str(readme), results)
    once = readme.read_text()
    report.write_readme(str(readme), results)
    assert readme.read_text() == once and once.startswith("# title\n\ntext\n")
    assert "SIMD: avx2" in once and "broken: unavailable: no wheel" in once and once.count(report.BEGIN) == 1



@pytest.mark.parametrize("written_differs", [False, True])
def test_outputs_are_checked_against_the_graph_as_written_where_the_optimized_session_differs(
        tmp_path, monkeypatch, written_differs):
    """As the suite's check (test_benchmarks): outputs that match onnxruntime's unoptimized graph
    match, and the row says so; outputs that match neither do not."""
    pytest.importorskip("onnxruntime")
    harness = importlib.import_module(f"{PACKAGE}.harness")
    models = importlib.import_module(f"{PACKAGE}.models")
    sessions = importlib.import_module(f"{PACKAGE}.sessions")
    model = models.mlp((8, 4))
    path = str(tmp_path / "mlp.onnx")
    onnx.save(model, path)
    real = sessions.ort_session
    monkeypatch.setattr(measure, "ort_session", lambda p, threads: ShiftedSession(real(p, threads)))
    if written_differs:
        monkeypatch.setattr(measure, "written_graph_outputs",
                            lambda p, threads, feed: ShiftedSession(real(p, threads, False)).run(None, feed))
    timing = harness.TimingConfig(warmup=1, min_runs=3, min_seconds=0.01, settle_ms=1, turn_ms=1)
    result = measure.measure(path, models.random_feed(model), 1, timing, modes=False, with_openvino=False,
                             decoder_steps=0)
    assert result["outputs_match"] is not written_differs
    if not written_differs:
        assert result["reference"] == "onnxruntime, graph as written"
        assert report._row("mlp", {**result, "onnxc_compile_s": 1.0})[4].endswith("yes (graph as written)")
