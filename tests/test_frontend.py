"""Frontend: loading sources, checking, opsets, functions, attributes, unsupported ops."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from helpers import make_model
from onnxc.compiler.errors import ModelError, UnsupportedError
from onnxc.compiler.frontend import build_graph, import_model, load_model


def relu_model(opset=17):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                      [("x", T.FLOAT, ["N", 4])], [("y", T.FLOAT, ["N", 4])], opset=opset)


def test_load_from_path_bytes_and_proto(tmp_path):
    m = relu_model()
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    for source in (str(path), path, m.SerializeToString(), m):
        _, g = import_model(source)
        assert [n.op_type for n in g.nodes] == ["Relu"]
        assert g.inputs[0].shape == ("N", 4)


def test_external_data_is_loaded(tmp_path):
    w = onnx.numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(1, 4096), "w")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [1, 4096])],
                   [("y", T.FLOAT, [1, 4096])], [w])
    path = tmp_path / "ext.onnx"
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    assert (tmp_path / "ext.data").exists()
    _, g = import_model(str(path))
    w_value = g.nodes[0].inputs[1]
    np.testing.assert_array_equal(w_value.const, np.arange(4096, dtype=np.float32).reshape(1, 4096))


def test_every_unsupported_op_is_listed_in_one_error():
    m = make_model([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("NoSuchOp", ["a"], ["b"], name="first", domain="custom"),
                    helper.make_node("NoSuchOp", ["b"], ["c"], name="second", domain="custom"),
                    helper.make_node("OtherOp", ["c"], ["y"], name="third", domain="custom")],
                   [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])], extra_opsets={"custom": 1})
    with pytest.raises(UnsupportedError) as err:
        import_model(m)
    text = str(err.value)
    assert "custom::NoSuchOp (opset 1): nodes 'first', 'second'" in text
    assert "custom::OtherOp (opset 1): nodes 'third'" in text


def test_the_op_registry_loads_whole_before_any_thread_looks_an_op_up():
    """The first lookup imports every op module. A second thread looking an op up meanwhile (a
    session's background build for its fed shapes, another thread's session) waits for the
    whole registry: it had found half of it, and refused Mul and Relu as unsupported. In a
    fresh interpreter, each op module's import made slow so that the second thread comes while
    the first is still loading."""
    import subprocess
    import sys
    code = """
import importlib, threading, time
real = importlib.import_module
def slow(name, *a, **k):
    if name.startswith("onnxc.compiler.ops."):
        time.sleep(0.002)
    return real(name, *a, **k)
importlib.import_module = slow
from onnxc.compiler.ops import registry
first = threading.Thread(target=registry.lookup, args=("", "Conv", 11))
first.start()
time.sleep(0.05)
found = [registry.lookup("", op, 11) is not None for op in ("Mul", "Relu", "Softmax", "Where")]
first.join()
print(found)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True, True, True, True]"


def test_op_outside_its_supported_opsets_is_reported():
    # Relu is registered from opset 1; a domain without an opset import is unsupported
    m = make_model([helper.make_node("Foo", ["x"], ["y"], domain="nowhere")], [("x", T.FLOAT, [2])],
                   [("y", T.FLOAT, [2])])
    with pytest.raises((UnsupportedError, ModelError)):
        import_model(m)


def test_attributes_get_schema_defaults_and_types():
    m = make_model([helper.make_node("LeakyRelu", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])])
    g = build_graph(load_model(m))
    assert g.nodes[0].attrs == {"alpha": pytest.approx(0.01)}


def test_unknown_attribute_is_an_error():
    m = make_model([helper.make_node("Relu", ["x"], ["y"], bogus=3)], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])])
    with pytest.raises(ModelError, match="unknown attribute 'bogus'"):
        build_graph(m)


def test_local_functions_are_inlined():
    fn = helper.make_function("local", "DoubleRelu", ["a"], ["b"],
                              [helper.make_node("Relu", ["a"], ["t"]), helper.make_node("Relu", ["t"], ["b"])],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("DoubleRelu", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    m = helper.make_model(graph, functions=[fn],
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    _, g = import_model(m)
    assert [n.op_type for n in g.nodes] == ["Relu", "Relu"]


def test_malformed_bytes_raise_model_error():
    with pytest.raises(ModelError):
        import_model(b"\x08\x07garbage-not-a-model\xff\xff")
    with pytest.raises(ModelError):
        import_model("/nonexistent/model.onnx")


def test_dangling_input_raises_model_error():
    m = make_model([helper.make_node("Relu", ["missing"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])])
    with pytest.raises(ModelError):
        import_model(m)


def test_deprecated_ops_load_in_the_opsets_they_were_written_for():
    m = make_model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
                   [("x", T.FLOAT, [1, 4, 3]), ("s", T.FLOAT, [2]), ("b", T.FLOAT, [2])],
                   [("y", T.FLOAT, [1, 4, 3])], opset=18)
    _, g = import_model(m)
    assert [n.op_type for n in g.nodes] == ["GroupNormalization"]


def test_big_initializers_are_checked_without_their_bytes(monkeypatch):
    """The checker sees big initializers as stand-ins without data (a model with hundreds of
    megabytes of weights is not copied and parsed again): the rest of the model is still
    checked, the stand-in is not what the graph is built from, and a big initializer whose
    bytes do not match its shape is still refused, when the graph is built."""
    from onnxc.compiler import frontend
    big = np.arange(1 << 18, dtype=np.float32).reshape(512, 512)
    seen = []
    monkeypatch.setattr(onnx.checker, "check_model", lambda m, *a, **k: seen.append(m))

    def model(w, node="MatMul"):
        return make_model([helper.make_node(node, ["x", "w"], ["y"])], [("x", T.FLOAT, [1, 512])],
                          [("y", T.FLOAT, [1, 512])], [w]).SerializeToString()
    g = build_graph(load_model(model(onnx.numpy_helper.from_array(big, "w"))))
    np.testing.assert_array_equal(g.nodes[0].inputs[1].const, big)
    stand_in = seen[-1].graph.initializer[0]
    assert (stand_in.name, list(stand_in.dims), stand_in.raw_data) == ("w", [0], b"")
    small = np.ones((4, 512), np.float32)   # (a small one goes to the checker as it is)
    load_model(model(onnx.numpy_helper.from_array(small, "w")))
    assert isinstance(seen[-1], bytes)
    monkeypatch.undo()
    with pytest.raises(ModelError, match="not valid ONNX.*NoSuchOp"):
        load_model(model(onnx.numpy_helper.from_array(big, "w"), node="NoSuchOp"))
    short = onnx.numpy_helper.from_array(big, "w")
    short.raw_data = short.raw_data[:-4]
    with pytest.raises(ModelError, match="initializer 'w' cannot be read"):
        build_graph(load_model(model(short)))
