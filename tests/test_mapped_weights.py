"""A model file's big initializers are read in place (compiler/mapped.py): the model is parsed
without their bytes, and the graph's arrays are read-only views of the file, mapped. What may
not happen: a mark that is not onnxc's read as data, bytes that do not fit a shape, a file
changed since it was loaded, or an artifact that still needs the model file."""
from __future__ import annotations

import gc
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

import onnxc
from onnxc.compiler import frontend, mapped
from onnxc.compiler.errors import ModelError, ModelParseError
from helpers import make_model, run_ort

RNG = np.random.default_rng(5)
BIG = (700, 400)     # 1.1 MB of float32: mapped (MAPPED_BYTES is 1 MiB)


def mlp(big=BIG, dtype=np.float32) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x @ w1 (big, mapped) + b, Relu, @ w2 (small, parsed as usual)."""
    arrays = {"w1": RNG.standard_normal(big).astype(dtype), "b": RNG.standard_normal(big[1]).astype(dtype),
              "w2": RNG.standard_normal((big[1], 10)).astype(dtype)}
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = make_model([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
                        helper.make_node("Relu", ["a"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])],
                       [("x", elem, [2, big[0]])], [("y", elem, [2, 10])],
                       [numpy_helper.from_array(v, k) for k, v in arrays.items()], opset=17)
    return model, arrays


def saved(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def test_big_initializers_of_a_model_file_are_read_only_views_of_it(tmp_path):
    model, arrays = mlp()
    path = saved(model, tmp_path / "m.onnx")
    loaded = frontend.load_model(path)
    marks = {t.name: mapped.is_mapped(t) for t in loaded.graph.initializer}
    assert marks == {"w1": True, "b": False, "w2": False}
    assert not loaded.graph.initializer[0].HasField("raw_data")
    graph = frontend.build_graph(loaded)
    w1 = next(v.const for v in graph.values() if v.name == "w1")
    np.testing.assert_array_equal(w1, arrays["w1"])
    assert not w1.flags.writeable
    x = RNG.standard_normal((2, BIG[0])).astype(np.float32)
    got = onnxc.InferenceSession(path).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)


def test_a_files_tensors_share_one_mapping_while_any_is_alive(tmp_path):
    """A mapping holds a file descriptor: the tensors of one file share it, and it closes with
    the last array that views it."""
    arrays = {f"w{i}": RNG.standard_normal(BIG).astype(np.float32) for i in range(6)}
    nodes = [helper.make_node("Add", ["x", "w0"], ["s0"])] + [
        helper.make_node("Add", [f"s{i - 1}", f"w{i}"], [f"s{i}"]) for i in range(1, 6)]
    model = make_model(nodes, [("x", T.FLOAT, list(BIG))], [("s5", T.FLOAT, list(BIG))],
                       [numpy_helper.from_array(v, k) for k, v in arrays.items()], opset=17)
    loaded = frontend.load_model(saved(model, tmp_path / "m.onnx"))
    fds = len(os.listdir("/proc/self/fd"))
    graph = frontend.build_graph(loaded)
    assert sum(mapped.is_mapped(t) for t in loaded.graph.initializer) == 6
    assert len(os.listdir("/proc/self/fd")) <= fds + 1
    for name, array in arrays.items():
        np.testing.assert_array_equal(next(v.const for v in graph.values() if v.name == name), array)
    del graph
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_types_whose_raw_data_is_not_the_array_are_parsed_as_usual(tmp_path):
    """bfloat16's raw data is read through numpy_helper (mapped: the plain numeric types only)."""
    w = RNG.standard_normal(BIG).astype(np.float32)
    tensor = helper.make_tensor("w", T.BFLOAT16, BIG, onnx.numpy_helper.from_array(w).raw_data[::2], raw=True)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", T.BFLOAT16, [1, BIG[0]])],
                       [("y", T.BFLOAT16, [1, BIG[1]])], [tensor], opset=17)
    loaded = frontend.load_model(saved(model, tmp_path / "m.onnx"))
    assert not mapped.is_mapped(loaded.graph.initializer[0])


def test_bytes_that_do_not_fit_the_shape_are_refused(tmp_path):
    model, _ = mlp()
    model.graph.initializer[0].dims[0] += 1
    path = saved(model, tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="initializer 'w1' cannot be read: 1120000 bytes of raw data for shape"):
        frontend.build_graph(frontend.load_model(path))
    with pytest.raises(ModelError, match="cannot be read"):
        onnxc.InferenceSession(path)


def test_a_model_file_changed_after_it_was_loaded_is_refused(tmp_path):
    model, _ = mlp()
    path = saved(model, tmp_path / "m.onnx")
    loaded = frontend.load_model(path)
    os.replace(saved(mlp()[0], tmp_path / "other.onnx"), path)
    with pytest.raises(ModelError, match="changed after the model was loaded"):
        frontend.build_graph(loaded)


@pytest.mark.filterwarnings("ignore:Ignoring unknown external data key")   # (onnx's, of the claim)
@pytest.mark.parametrize("location", ["absolute", "relative"])
def test_a_model_files_own_claim_to_be_mapped_is_external_data_like_any_other(tmp_path, location):
    """A file naming onnxc's mark in a tensor's external data gets no trust from it: an absolute
    location (here another model file onnxc has loaded) is refused; a relative one is checked and
    read as external data."""
    victim = saved(mlp()[0], tmp_path / "victim.onnx")
    frontend.load_model(victim)   # (now a file onnxc has mapped)
    model, _ = mlp(big=(30, 20))
    tensor = model.graph.initializer[0]
    data = tensor.raw_data
    (tmp_path / "w1.bin").write_bytes(data)
    tensor.ClearField("raw_data")
    tensor.data_location = T.EXTERNAL
    where = victim if location == "absolute" else "w1.bin"
    for key, value in (("location", where), ("offset", "0"), ("length", str(len(data))), (mapped.KEY, "1")):
        tensor.external_data.add(key=key, value=value)
    path = saved(model, tmp_path / "claim.onnx")
    if location == "absolute":
        with pytest.raises(ModelError, match="must be a path relative to the model's folder"):
            frontend.load_model(path)
        return
    loaded = frontend.load_model(path)
    assert not loaded.graph.initializer[0].external_data
    assert loaded.graph.initializer[0].raw_data == data


def test_a_claim_in_a_subgraph_of_a_file_with_big_weights_is_external_data_like_any_other(tmp_path):
    """A file whose main graph has big raw data (so it is scanned) and whose If branch holds a
    tensor claiming the mark at the file's own path: the claim is dropped and the location,
    absolute, refused."""
    model, _ = mlp()
    path = str(tmp_path / "m.onnx")
    claim = helper.make_tensor("c", T.FLOAT, [4], [0.0] * 4)
    claim.ClearField("float_data")
    claim.data_location = T.EXTERNAL
    for key, value in (("location", path), ("offset", "0"), ("length", "16"), (mapped.KEY, "1")):
        claim.external_data.add(key=key, value=value)
    branch = helper.make_graph([helper.make_node("Constant", [], ["k"], value=claim)], "b", [],
                               [helper.make_tensor_value_info("k", T.FLOAT, [4])])
    model.graph.node.append(helper.make_node("If", ["flag"], ["o"], then_branch=branch, else_branch=branch))
    model.graph.input.append(helper.make_tensor_value_info("flag", T.BOOL, []))
    model.graph.output.append(helper.make_tensor_value_info("o", T.FLOAT, [4]))
    saved(model, path)
    with pytest.raises(ModelError, match="must be a path relative to the model's folder"):
        frontend.load_model(path)


def test_a_forged_mark_in_a_model_given_as_a_proto_is_refused(tmp_path):
    model, _ = mlp(big=(30, 20))
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = T.EXTERNAL
    for key, value in (("location", str(tmp_path / "nothing.bin")), ("offset", "0"), ("length", "2400"),
                       (mapped.KEY, "1")):
        tensor.external_data.add(key=key, value=value)
    with pytest.raises(ModelError, match="is not a file onnxc has loaded a model's data from"):
        onnxc.InferenceSession(model)


def test_with_data_gives_the_model_with_its_bytes(tmp_path):
    model, _ = mlp()
    path = saved(model, tmp_path / "m.onnx")
    full = mapped.with_data(frontend.load_model(path))
    assert not any(mapped.is_mapped(t) for t in full.graph.initializer)
    assert [numpy_helper.to_array(t).tobytes() for t in full.graph.initializer] == \
        [numpy_helper.to_array(t).tobytes() for t in model.graph.initializer]


def test_a_model_compiled_per_signature_holds_its_weights_not_the_model_files(tmp_path):
    """An artifact that compiles per input signature holds the model itself: with the mapped
    bytes in it, so that it runs after the model file is gone."""
    model, arrays = mlp()
    model.graph.node.append(helper.make_node("Squeeze", ["s"], ["q"]))
    model.graph.input.append(helper.make_tensor_value_info("s", T.FLOAT, ["a", 3, "b"]))
    model.graph.output.append(helper.make_tensor_value_info("q", T.FLOAT, ["a", 3, "b"]))
    path = saved(model, tmp_path / "m.onnx")
    onnxc.compile_model(path, tmp_path / "artifact")
    os.unlink(path)
    x, s = RNG.standard_normal((2, BIG[0])).astype(np.float32), RNG.standard_normal((1, 3, 1)).astype(np.float32)
    y, q = onnxc.InferenceSession(str(tmp_path / "artifact")).run(None, {"x": x, "s": s})
    np.testing.assert_allclose(y, np.maximum(x @ arrays["w1"] + arrays["b"], 0) @ arrays["w2"], rtol=1e-4, atol=1e-2)
    np.testing.assert_array_equal(q, s.reshape(3))


def test_a_model_with_external_data_of_its_own_loads_as_before(tmp_path):
    """Big raw data inline and a tensor in a file of its own: read the usual way, whole."""
    model, arrays = mlp()
    w2 = model.graph.initializer[2]
    (tmp_path / "w2.bin").write_bytes(w2.raw_data)
    size = len(w2.raw_data)
    w2.ClearField("raw_data")
    w2.data_location = T.EXTERNAL
    for key, value in (("location", "w2.bin"), ("offset", "0"), ("length", str(size))):
        w2.external_data.add(key=key, value=value)
    loaded = frontend.load_model(saved(model, tmp_path / "m.onnx"))
    assert not any(mapped.is_mapped(t) for t in loaded.graph.initializer)
    graph = frontend.build_graph(loaded)
    for name, array in arrays.items():
        np.testing.assert_array_equal(next(v.const for v in graph.values() if v.name == name), array)


def test_big_external_data_is_read_in_place_too(tmp_path):
    """A model's own external data file (checked as always): its big plain tensors are views of
    the file at their offsets, the small ones read as usual."""
    model, arrays = mlp()
    external = onnx.ModelProto()
    external.CopyFrom(model)   # (onnx.save moves the data of the model it saves out)
    onnx.save(external, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    loaded = frontend.load_model(str(tmp_path / "m.onnx"))
    marks = {t.name: mapped.is_mapped(t) for t in loaded.graph.initializer}
    assert marks == {"w1": True, "b": False, "w2": False}
    graph = frontend.build_graph(loaded)
    for name, array in arrays.items():
        np.testing.assert_array_equal(next(v.const for v in graph.values() if v.name == name), array)
    x = RNG.standard_normal((2, BIG[0])).astype(np.float32)
    np.testing.assert_allclose(onnxc.InferenceSession(str(tmp_path / "m.onnx")).run(None, {"x": x})[0],
                               run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-3)
    (tmp_path / "m.data").write_bytes((tmp_path / "m.data").read_bytes())   # (rewritten: a new mtime)
    os.utime(tmp_path / "m.data", ns=(1, 1))
    with pytest.raises(ModelError, match="changed after the model was loaded"):
        frontend.build_graph(loaded)


def test_a_damaged_big_file_is_a_parse_error(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x3a\xff\xff\xff\xff\x0f" + os.urandom(2 << 20))   # (graph, length past the end)
    with pytest.raises(ModelParseError):
        frontend.load_model(str(path))


def test_a_copied_model_file_is_mapped_from_where_it_was_loaded(tmp_path):
    model, _ = mlp()
    first = saved(model, tmp_path / "a.onnx")
    second = str(tmp_path / "b.onnx")
    shutil.copy(first, second)
    a, b = frontend.load_model(first), frontend.load_model(second)
    os.unlink(first)
    with pytest.raises(ModelError, match="cannot be read"):
        frontend.build_graph(a)
    frontend.build_graph(b)
