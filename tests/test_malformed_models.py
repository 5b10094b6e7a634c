"""Malformed models: each is refused with an onnxc exception whose message names the problem.

Every case is a small model written proto by proto (onnx.checker bypassed) and given to
``onnxc.InferenceSession``, as bytes or, for external data, as a path. ``ORT`` records what
onnxruntime 1.32 does with the same model ("refuses" or "loads"); ``test_onnxruntime_reaction``
keeps that record true. Where onnxc refuses a model onnxruntime loads, the case says why
onnxc is stricter.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from onnxc import cli
from tools import require_module
from onnxc.compiler.errors import ModelError, ShapeError, UnsupportedError

Source = Union[bytes, str]


def vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def graph_model(nodes, inputs, outputs, inits=(), opset: int = 21, ir: int = 10) -> onnx.ModelProto:
    """A model straight from protos: onnx.checker never sees it before onnxc does."""
    g = helper.make_graph(list(nodes), "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def relu(ir: int = 10, opset: int = 21) -> onnx.ModelProto:
    return graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", T.FLOAT, [2, 3])],
                       [("y", T.FLOAT, [2, 3])], ir=ir, opset=opset)


def add_initializer(tensor: onnx.TensorProto) -> bytes:
    """y = x + w, w a float[4] initializer as given."""
    return graph_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])],
                       [tensor]).SerializeToString()


def raw_tensor(name: str, elem: int, dims, **fields) -> onnx.TensorProto:
    """A TensorProto with exactly the fields given (helper.make_tensor would check them)."""
    t = onnx.TensorProto(name=name, data_type=elem, dims=list(dims))
    for field, value in fields.items():
        if isinstance(value, bytes):
            setattr(t, field, value)
        else:
            getattr(t, field).extend(value)
    return t


def conv(**attrs) -> bytes:
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    return graph_model([node], [("x", T.FLOAT, [1, 1, 5, 5])], [("y", T.FLOAT, ["n", "c", "h", "w"])],
                       [w]).SerializeToString()


def if_model(then_nodes, then_outputs) -> bytes:
    then = helper.make_graph(then_nodes, "then", [], [vi(n, T.FLOAT, [2]) for n in then_outputs])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, [2])])
    return graph_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                       [("c", T.BOOL, []), ("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString()


def nested_bytes(depth: int) -> bytes:
    """A ModelProto whose graph nests ``depth`` If bodies, spelled in protobuf's wire format
    (the protobuf library refuses to build one that deep)."""
    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    graph = field(1, b"")                                     # GraphProto{node: {}}
    for _ in range(depth):
        attribute = field(1, b"then_branch") + _varint(6 << 3) + _varint(5) + field(6, graph)   # name, type GRAPH, g
        graph = field(1, field(4, b"If") + field(5, attribute))                              # node{op_type, attribute}
    return _varint(1 << 3) + _varint(10) + field(7, graph)    # ir_version 10, graph


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


# --- external data ---------------------------------------------------------------------------

def external(tmp: Path, location: str, offset=None, length=None) -> str:
    """model/m.onnx whose initializer w (float[4]) lives in ``location``; 16 bytes of zeros are
    written both to model/w.bin and, outside the model's folder, to secret.bin."""
    folder = tmp / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(bytes(16))
    (tmp / "secret.bin").write_bytes(bytes(16))
    w = raw_tensor("w", T.FLOAT, [4])
    w.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            w.external_data.add(key=key, value=str(value))
    path = folder / "m.onnx"
    path.write_bytes(add_initializer(w))
    return str(path)


def symlink_out(tmp: Path) -> str:
    path = external(tmp, "link.bin")
    os.symlink(tmp / "secret.bin", tmp / "model" / "link.bin")
    return path


def external_as_bytes(tmp: Path) -> bytes:
    # The checker and numpy_helper would resolve "w.bin" against the working directory
    return Path(external(tmp, "w.bin")).read_bytes()


# --- the cases -------------------------------------------------------------------------------

@dataclass
class Case:
    id: str
    build: Callable[[Path], Source]
    error: type
    match: str        # a regular expression the message must contain
    ort: str          # what onnxruntime does with the model: "refuses" or "loads"


CASES = [
    # protobuf
    Case("truncated", lambda tmp: relu().SerializeToString()[:-7], ModelError, "cannot load the model", "refuses"),
    Case("corrupted", lambda tmp: b"\x08\x07garbage\xff\xff", ModelError, "cannot load the model", "refuses"),
    Case("empty_bytes", lambda tmp: b"", ModelError, "ir_version", "refuses"),
    Case("nesting_beyond_protobuf_limit", lambda tmp: nested_bytes(40), ModelError, "cannot load the model",
         "refuses"),
    # graph structure
    Case("cycle", lambda tmp: graph_model(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
        [("x", T.FLOAT, [2])], [("b", T.FLOAT, [2])]).SerializeToString(),
        ModelError, "topologically sorted.*input 'b'", "refuses"),
    Case("dangling_input", lambda tmp: graph_model(
        [helper.make_node("Relu", ["nothing"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]
    ).SerializeToString(), ModelError, "input 'nothing'", "refuses"),
    Case("duplicate_node_output", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
        [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString(),
        ModelError, "'y' has been used as output names multiple times", "refuses"),
    Case("duplicate_graph_input", lambda tmp: graph_model(
        [helper.make_node("Add", ["x", "x"], ["y"])], [("x", T.FLOAT, [2]), ("x", T.FLOAT, [2])],
        [("y", T.FLOAT, [2])]).SerializeToString(), ModelError, "'x' has been used as graph input names", "refuses"),
    Case("node_output_shadows_input", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["x"])], [("x", T.FLOAT, [2])], [("x", T.FLOAT, [2])]
    ).SerializeToString(), ModelError, "'x' has been used as output names multiple times", "refuses"),
    # onnxruntime keeps one of two same-named initializers: which one is an accident of its loader
    Case("duplicate_initializer", lambda tmp: add_initializer_twice(), ModelError,
         "w initializer name is not unique", "loads"),
    # onnxruntime runs a model without outputs and returns []; onnxc refuses to compile nothing
    Case("zero_outputs", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2])], []).SerializeToString(),
        ModelError, "no outputs", "loads"),
    Case("no_graph", lambda tmp: onnx.ModelProto(ir_version=10, opset_import=[helper.make_opsetid("", 21)])
         .SerializeToString(), ModelError, "'graph'", "refuses"),
    Case("empty_op_type", lambda tmp: graph_model(
        [helper.make_node("", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString(),
        ModelError, "op_type", "refuses"),
    Case("wrong_input_count", lambda tmp: graph_model(
        [helper.make_node("Add", ["x"], ["y"])], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString(),
        ModelError, "input size 1 not in range", "refuses"),
    Case("input_without_type", lambda tmp: without_input_type(), ModelError, "'type' of 'value_info'", "refuses"),
    Case("input_unknown_element_type", lambda tmp: with_input_elem_type(99), ModelError,
         "element type 99 is not an ONNX element type", "refuses"),
    Case("input_undefined_element_type", lambda tmp: with_input_elem_type(T.UNDEFINED), ModelError,
         "element type 0 is not an ONNX element type", "refuses"),
    Case("input_types_clash", lambda tmp: graph_model(
        [helper.make_node("Add", ["x", "z"], ["y"])], [("x", T.FLOAT, [2]), ("z", T.INT64, [2])],
        [("y", T.FLOAT, [2])]).SerializeToString(), ShapeError, "Add node: input types differ", "refuses"),
    # subgraphs
    Case("subgraph_reads_undefined_outer_value", lambda tmp: if_model(
        [helper.make_node("Relu", ["ghost"], ["t"])], ["t"]), ModelError, "input 'ghost'", "refuses"),
    Case("subgraph_output_not_produced", lambda tmp: if_model(
        [helper.make_node("Relu", ["x"], ["t"])], ["t", "nowhere"]), ModelError, "'nowhere' is not an output",
        "refuses"),
    Case("loop_body_without_iteration_inputs", lambda tmp: loop_with_short_body(), ShapeError,
         "Loop node: the body takes 1 inputs", "refuses"),
    # attributes
    Case("conv_kernel_shape_is_a_string", lambda tmp: conv(kernel_shape="3x3"), ModelError,
         "kernel_shape'. Expected: 'INTS', actual: 'STRING'", "refuses"),
    Case("conv_kernel_shape_wrong_length", lambda tmp: conv(kernel_shape=[3]), ShapeError,
         "kernel_shape \\[3\\] must have 2 values", "refuses"),
    Case("conv_strides_not_positive", lambda tmp: conv(strides=[0, -1]), ShapeError, "must be at least 1", "refuses"),
    # onnxruntime loads it and would need ~19 YB for Y; onnxc compiled it into C that gcc rejected
    Case("conv_absurd_pads", lambda tmp: conv(pads=[1 << 40] * 4), ShapeError, "output 'y' .* over onnxc's limit",
         "loads"),
    Case("attribute_without_type", lambda tmp: with_untyped_attribute(), ModelError, "'type' of 'attr'", "refuses"),
    Case("cast_to_unknown_type", lambda tmp: graph_model(
        [helper.make_node("Cast", ["x"], ["y"], to=99)], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]
    ).SerializeToString(), ModelError, "element type 99 is not an ONNX element type", "refuses"),
    Case("transpose_perm_out_of_range", lambda tmp: graph_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])], [("x", T.FLOAT, [2, 3])],
        [("y", T.FLOAT, ["a", "b"])]).SerializeToString(), ShapeError, "perm 5 is out of range", "refuses"),
    Case("constant_without_value", lambda tmp: with_constant(), ModelError,
         "Constant node: exactly one value attribute is required, got none", "refuses"),
    # onnxruntime takes one of the two values
    Case("constant_with_two_values", lambda tmp: with_constant(value_float=1.0, value_int=2), ModelError,
         "exactly one value attribute is required, got \\['value_float', 'value_int'\\]", "loads"),
    Case("constant_tensor_data_too_short", lambda tmp: with_constant(
        value=raw_tensor("v", T.FLOAT, [2], raw_data=bytes(3))), ModelError, "raw_data size \\(3 bytes\\)",
        "refuses"),
    # opset and IR version
    Case("ir_version_newer_than_known", lambda tmp: relu(ir=99).SerializeToString(), ModelError,
         "ir_version 99 is higher", "refuses"),
    # onnxruntime takes IR 0 for the oldest
    Case("ir_version_unset", lambda tmp: relu(ir=0).SerializeToString(), ModelError, "ir_version", "loads"),
    # onnxruntime ignores the IR version here
    Case("ir_version_before_opset_imports", lambda tmp: relu(ir=1).SerializeToString(), ModelError,
         "IR version < 3 cannot have opset_import", "loads"),
    Case("opset_newer_than_known", lambda tmp: relu(opset=9999).SerializeToString(), UnsupportedError,
         "opset 9999 of ai.onnx is newer than the newest", "refuses"),
    Case("ml_opset_newer_than_known", lambda tmp: with_opset("ai.onnx.ml", 999), UnsupportedError,
         "opset 999 of ai.onnx.ml is newer", "refuses"),
    Case("opset_zero", lambda tmp: relu(opset=0).SerializeToString(), ModelError, "domain_version of 0", "refuses"),
    Case("no_opset_import", lambda tmp: without_opsets(), ModelError, "must specify opset_import", "refuses"),
    # onnxruntime keeps one of the two imports
    Case("opset_imported_twice", lambda tmp: with_opset("", 13), ModelError,
         "opset of ai.onnx imported twice: 21 and 13", "loads"),
    # absurd shapes: refused at compile time, before the arena (or gcc) sees them
    Case("input_dim_2_pow_40", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [1 << 40])], [("y", T.FLOAT, [1 << 40])]
    ).SerializeToString(), ShapeError, "input 'x' of shape \\[1099511627776\\] .* over onnxc's limit", "loads"),
    Case("input_dim_2_pow_63", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [(1 << 63) - 1])], [("y", T.FLOAT, ["n"])]
    ).SerializeToString(), ShapeError, "input 'x' .* over onnxc's limit", "loads"),
    # the planned arena would be 4 TiB; onnxruntime allocates (and fails) at run time
    Case("intermediate_of_2_pow_40_elements", lambda tmp: graph_model(
        [helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        [("x", T.FLOAT, [1])], [("y", T.FLOAT, ["n"])], [numpy_helper.from_array(np.array([1 << 40]), "s")]
    ).SerializeToString(), ShapeError, "ConstantOfShape node: output 'c' .* over onnxc's limit", "loads"),
    Case("output_of_2_pow_40_elements", lambda tmp: graph_model(
        [helper.make_node("Expand", ["x", "s"], ["y"])], [("x", T.FLOAT, [1])], [("y", T.FLOAT, ["a", "b"])],
        [numpy_helper.from_array(np.array([1 << 20, 1 << 20]), "s")]).SerializeToString(),
        ShapeError, "Expand node: output 'y' .* over onnxc's limit", "loads"),
    # onnxruntime reads -5 as an unknown dim; onnxc takes only -1 (some exporters' spelling of it)
    Case("input_negative_dim", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [-5])], [("y", T.FLOAT, [-5])]).SerializeToString(),
        ModelError, "input 'x' has negative dim -5 on axis 0", "loads"),
    Case("reshape_to_wrong_size", lambda tmp: graph_model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, ["n"])],
        [numpy_helper.from_array(np.array([5]), "s")]).SerializeToString(), ShapeError,
        "cannot reshape \\(2, 3\\) \\(6 elements\\) to \\[5\\]", "loads"),
    # tensor data against its shape and type
    Case("float_data_shorter_than_shape", lambda tmp: add_initializer(
        raw_tensor("w", T.FLOAT, [4], float_data=[1.0, 2.0, 3.0])), ModelError, "float_data size \\(3\\)", "refuses"),
    Case("raw_data_of_wrong_length", lambda tmp: add_initializer(raw_tensor("w", T.FLOAT, [4], raw_data=bytes(10))),
         ModelError, "raw_data size \\(10 bytes\\) is too small", "refuses"),
    Case("initializer_unknown_element_type", lambda tmp: add_initializer(
        raw_tensor("w", 99, [4], raw_data=bytes(16))), ModelError, "element type 99 is not an ONNX element type",
        "refuses"),
    Case("initializer_undefined_element_type", lambda tmp: add_initializer(
        raw_tensor("w", T.UNDEFINED, [4], raw_data=bytes(16))), ModelError, "UNDEFINED is not allowed", "refuses"),
    Case("string_data_in_float_tensor", lambda tmp: add_initializer(
        raw_tensor("w", T.FLOAT, [4], string_data=[b"a"] * 4)), ModelError, "instead of 'string_data'", "refuses"),
    Case("int64_data_in_float_tensor", lambda tmp: add_initializer(
        raw_tensor("w", T.FLOAT, [4], int64_data=[1] * 4)), ModelError, "instead of 'int64_data'", "refuses"),
    Case("initializer_negative_dim", lambda tmp: add_initializer(raw_tensor("w", T.FLOAT, [-4], raw_data=b"")),
         ModelError, "Negative dimension value \\(tensor name: w\\)", "refuses"),
    Case("initializer_dim_2_pow_40", lambda tmp: add_initializer(
        raw_tensor("w", T.FLOAT, [1 << 40], raw_data=bytes(16))), ModelError, "4398046511104 bytes required",
        "refuses"),
    # no data to contradict, yet its strides overflow 64 bits
    Case("initializer_empty_with_dim_2_pow_62", lambda tmp: add_initializer(
        raw_tensor("w", T.FLOAT, [0, 1 << 62], raw_data=b"")), ShapeError,
        "initializer 'w' of shape \\[0, 4611686018427387904\\] .* over onnxc's limit", "refuses"),
    # onnxruntime loads an unnamed initializer nothing can read
    Case("initializer_without_name", lambda tmp: graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])],
        [raw_tensor("", T.FLOAT, [4], float_data=[1.0] * 4)]).SerializeToString(),
        ModelError, "initializers must have a non-empty name", "loads"),
    # external data
    Case("external_data_with_dotdot", lambda tmp: external(tmp, "../../../../../../../etc/passwd"), ModelError,
         "external data '../../../../../../../etc/passwd' is outside the model's folder", "refuses"),
    Case("external_data_next_to_the_folder", lambda tmp: external(tmp, "../secret.bin"), ModelError,
         "'../secret.bin' is outside the model's folder", "refuses"),
    Case("external_data_absolute_path", lambda tmp: external(tmp, "/etc/passwd"), ModelError,
         "'/etc/passwd' must be a path relative to the model's folder", "refuses"),
    Case("external_data_symlink_leaving_the_folder", symlink_out, ModelError,
         "'link.bin' is outside the model's folder", "refuses"),
    Case("external_data_missing_file", lambda tmp: external(tmp, "nothere.bin"), ModelError,
         "'nothere.bin' is not a file in the model's folder", "refuses"),
    Case("external_data_offset_beyond_file", lambda tmp: external(tmp, "w.bin", offset=1000), ModelError,
         "offset 1000 and length None do not fit its 16 bytes", "refuses"),
    Case("external_data_length_beyond_file", lambda tmp: external(tmp, "w.bin", offset=8, length=16), ModelError,
         "offset 8 and length 16 do not fit its 16 bytes", "refuses"),
    Case("external_data_shorter_than_shape", lambda tmp: external(tmp, "w.bin", length=8), ModelError,
         "raw_data size \\(8 bytes\\) is too small", "refuses"),
    Case("external_data_in_model_bytes", external_as_bytes, ModelError,
         "a model given as bytes or a ModelProto has no folder", "refuses"),
    Case("contrib_node_short_of_inputs", lambda tmp: contrib_node_short_of_inputs(), ModelError,
         "SkipLayerNormalization needs its first 3 input", "refuses"),
]


def add_initializer_twice() -> bytes:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    return graph_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])],
                       [w, w]).SerializeToString()


def without_input_type() -> bytes:
    m = relu()
    m.graph.input[0].ClearField("type")
    return m.SerializeToString()


def with_input_elem_type(elem: int) -> bytes:
    m = relu()
    m.graph.input[0].type.tensor_type.elem_type = elem
    return m.SerializeToString()


def without_opsets() -> bytes:
    m = relu()
    del m.opset_import[:]
    return m.SerializeToString()


def with_opset(domain: str, version: int) -> bytes:
    m = relu()
    m.opset_import.add(domain=domain, version=version)
    return m.SerializeToString()


def with_untyped_attribute() -> bytes:
    node = helper.make_node("LeakyRelu", ["x"], ["y"])
    node.attribute.add(name="alpha")
    return graph_model([node], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString()


def with_constant(**value) -> bytes:
    return graph_model([helper.make_node("Constant", [], ["c"], **value), helper.make_node("Add", ["x", "c"], ["y"])],
                       [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]).SerializeToString()


def contrib_node_short_of_inputs() -> bytes:
    """com.microsoft SkipLayerNormalization without its gamma (the fuzz campaign's find)."""
    m = graph_model([helper.make_node("SkipLayerNormalization", ["x", "x"], ["y"], domain="com.microsoft")],
                    [("x", T.FLOAT, [2, 4])], [("y", T.FLOAT, [2, 4])])
    m.opset_import.add(domain="com.microsoft", version=1)
    return m.SerializeToString()


def loop_with_short_body() -> bytes:
    body = helper.make_graph([helper.make_node("Identity", ["v"], ["v2"])], "body", [vi("v", T.FLOAT, [2])],
                             [vi("v2", T.FLOAT, [2])])
    trip = numpy_helper.from_array(np.array(3, np.int64), "n")
    return graph_model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)], [("x", T.FLOAT, [2])],
                       [("y", T.FLOAT, [2])], [trip]).SerializeToString()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_model_is_refused(case, tmp_path):
    source = case.build(tmp_path)
    with pytest.raises(case.error, match=case.match):
        onnxc.InferenceSession(source)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_onnxruntime_reaction(case, tmp_path):
    ort = require_module("onnxruntime")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    source = case.build(tmp_path)
    try:
        ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
        reaction = "loads"
    except Exception:
        reaction = "refuses"
    assert reaction == case.ort


def test_cli_compile_reports_a_malformed_model_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "cycle.onnx"
    path.write_bytes(CASES[[c.id for c in CASES].index("cycle")].build(tmp_path))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out")]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("onnxc: error: the model is not valid ONNX: Nodes in a graph must be topologically sorted")
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "libmodel.so").exists()


def test_cli_compile_refuses_external_data_outside_the_folder(tmp_path):
    path = external(tmp_path, "../secret.bin")
    proc = subprocess.run([sys.executable, "-m", "onnxc", "compile", path, "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == cli.EXIT_ERROR, proc.stderr
    assert "'../secret.bin' is outside the model's folder" in proc.stderr and "Traceback" not in proc.stderr


def test_compile_model_refuses_an_absurd_intermediate(tmp_path):
    source = CASES[[c.id for c in CASES].index("intermediate_of_2_pow_40_elements")].build(tmp_path)
    with pytest.raises(ShapeError, match="over onnxc's limit"):
        onnxc.compile_model(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_external_data_inside_the_folder_still_loads(tmp_path):
    # the counterpart of the external data cases: the checks refuse only what leaves the folder
    (tmp_path / "sub").mkdir()
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    onnx.save(onnx.load_model_from_string(add_initializer(w)), tmp_path / "m.onnx", save_as_external_data=True,
              location="sub/w.bin", size_threshold=0)
    sess = onnxc.InferenceSession(str(tmp_path / "m.onnx"))
    y, = sess.run(None, {"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


def test_a_minus_one_dim_is_read_as_unknown(tmp_path):
    # as onnxruntime reads it; exporters that know no dim_param write it
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [-1, 2])], [("y", T.FLOAT, [-1, 2])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    y, = sess.run(None, {"x": -np.ones((3, 2), np.float32)})
    assert y.shape == (3, 2)


def test_ir_version_older_than_its_opset_still_loads():
    # IR 3 predates opset 21 (which came with IR 10); onnxruntime runs such models, and exporters
    # (and this suite's helpers) write lower IR versions than their opsets need, so onnxc does too
    sess = onnxc.InferenceSession(relu(ir=3).SerializeToString())
    y, = sess.run(None, {"x": -np.ones((2, 3), np.float32)})
    assert not y.any()


def test_external_data_pointing_at_an_endless_file_is_refused_quickly(tmp_path):
    path = external(tmp_path, "/dev/zero", length=16)
    script = textwrap.dedent(f"""
        import onnxc
        try:
            onnxc.InferenceSession({path!r})
        except onnxc.ModelError as e:
            print("refused:", e)
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20,
                              env={**os.environ, "ONNXC_CACHE_DIR": str(tmp_path / "cache")})
    except subprocess.TimeoutExpired:
        pytest.fail("InferenceSession read /dev/zero for 20 s")
    assert "refused: tensor 'w': external data '/dev/zero' must be a path relative" in proc.stdout, proc.stderr



def _with_bytes(model: onnx.ModelProto, marker: str, replacement: bytes) -> bytes:
    data = model.SerializeToString()
    assert data.count(marker.encode()) == 1
    return data.replace(marker.encode(), replacement)


@pytest.mark.parametrize("where", ["graph_name", "node_name", "dim_param", "weight_doc", "weight_data_key"])
def test_a_name_that_is_not_utf8_is_refused(where):
    # protobuf hands such a string field over as bytes, which the emitter once choked on
    # (TypeError): found by the fuzzing campaign (tests/fuzz/)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="NODEMARK" if where == "node_name" else "add")
    w = helper.make_tensor("w", T.FLOAT, [1], [1.0])
    if where == "weight_doc":
        w.doc_string = "WDOCMARK"
    if where == "weight_data_key":   # (a string inside a message of the tensor: checked before the data is)
        entry = w.external_data.add()
        entry.key, entry.value = "KEYSMARK", "v"
    graph = helper.make_graph([node], "GRAPHMARK" if where == "graph_name" else "g",
                              [vi("x", T.FLOAT, ["DIMMARK" if where == "dim_param" else "n"])], [vi("y", T.FLOAT, ["m"])],
                              [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    marker = {"graph_name": "GRAPHMARK", "node_name": "NODEMARK", "dim_param": "DIMMARK", "weight_doc": "WDOCMARK",
              "weight_data_key": "KEYSMARK"}[where]
    with pytest.raises(ModelError, match="is not UTF-8 text"):
        onnxc.InferenceSession(_with_bytes(model, marker, b"\xff\xfe" + b"_" * (len(marker) - 2)))


@pytest.mark.parametrize("breakage", ["unknown data_type", "data beyond its dims"])
def test_a_constant_in_a_branch_that_cannot_be_read_is_refused(breakage):
    # onnx's checker does not read every tensor inside a subgraph; numpy_helper's KeyError or
    # ValueError once escaped: found by the fuzzing campaign (tests/fuzz/)
    value = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "c")
    if breakage == "unknown data_type":
        value.data_type = 1000
    else:
        value.dims[:] = [1]
    then = helper.make_graph([helper.make_node("Constant", [], ["c"], value=value)], "then", [], [vi("c", T.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [], [vi("same", T.FLOAT, None)])
    graph = helper.make_graph([helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)], "g",
                              [vi("x", T.FLOAT, [2]), vi("flag", T.BOOL, [])], [vi("y", T.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match="tensor cannot be read"):
        onnxc.InferenceSession(model.SerializeToString())
