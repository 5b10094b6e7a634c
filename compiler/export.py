"""The optimized IR written back as an ONNX model (SessionOptions.optimized_model_filepath).

Folded values become initializers, bodies are written from their optimized IR, and
symbolic dims keep their names, so onnxruntime (or onnxc) can load the result and
compute the same outputs.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import dtypes as dt
from .errors import UnsupportedError
from .ir import Graph, Node, Value
from .ops import _fused, registry


def export_model(graph: Graph, producer: str = "onnxc") -> onnx.ModelProto:
    proto = _graph(graph, top=True)
    opsets = [helper.make_opsetid(domain, version) for domain, version in sorted(graph.opsets.items())]
    model = helper.make_model(proto, opset_imports=opsets, producer_name=producer)
    meta = graph.meta
    model.doc_string = meta.doc_string
    model.domain = meta.domain
    model.model_version = meta.model_version
    for key, value in meta.custom_metadata_map.items():
        model.metadata_props.add(key=key, value=value)
    model.ir_version = min(model.ir_version, 10)
    return model


def _type(v: Value) -> onnx.TypeProto:
    shape = None if v.shape is None else [d if isinstance(d, int) else str(d) for d in v.shape]
    if v.kind == "tensor":
        return helper.make_tensor_type_proto(v.dtype.onnx, shape)
    tensor = helper.make_tensor_type_proto(v.dtype.onnx, shape)
    if v.kind == "sequence":
        return helper.make_sequence_type_proto(tensor)
    if v.kind == "optional":
        return helper.make_optional_type_proto(tensor)
    if v.kind == "optional_sequence":
        return helper.make_optional_type_proto(helper.make_sequence_type_proto(tensor))
    if v.kind == "map_sequence":
        keys = v.producer.impl.keys(v.producer)
        key = dt.STRING.onnx if keys and isinstance(keys[0], str) else dt.INT64.onnx
        return helper.make_sequence_type_proto(helper.make_map_type_proto(key, helper.make_tensor_type_proto(
            dt.FLOAT.onnx, [])))
    raise UnsupportedError(f"cannot export {v.type_str()}")


def _value_info(name: str, v: Value) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, _type(v))


def _graph(g: Graph, top: bool = False) -> onnx.GraphProto:
    nodes: list[onnx.NodeProto] = []
    inits: dict[str, onnx.TensorProto] = {}
    defined = set(g.inputs)

    def ref(v: Value | None) -> str:
        if v is None:
            return ""
        if v.const is not None and v not in defined and v.name not in inits:
            inits[v.name] = numpy_helper.from_array(_array(v), v.name)
        return v.name

    for n in g.nodes:
        inputs = [ref(v) for v in n.inputs]
        if n.domain == _fused.DOMAIN:  # onnxc's internal kernels go out as the standard ops they fuse
            nodes.extend(n.impl.export(n, inputs, [o.name for o in n.outputs]))
        else:
            nodes.append(node_proto(n, inputs))
        defined.update(n.outputs)
    outputs = []
    for v, name in zip(g.outputs, g.output_names or [o.name for o in g.outputs]):
        src = ref(v)
        if src != name:  # a forwarded input, a constant, or a value a pass renamed
            nodes.append(helper.make_node("Identity", [src], [name]))
        outputs.append(_value_info(name, v))
    inputs = [_value_info(v.name, v) for v in g.inputs]
    return helper.make_graph(nodes, g.name or "main", inputs, outputs, list(inits.values()))


def _array(v: Value) -> np.ndarray:
    array = np.asarray(v.const)
    if v.dtype is dt.STRING:
        return np.array([x.encode("utf-8") if isinstance(x, str) else x for x in array.reshape(-1)],
                        dtype=object).reshape(array.shape)
    return array


def node_proto(n: Node, inputs: list[str]) -> onnx.NodeProto:
    """A standard IR node as ONNX (inputs: the names it reads)."""
    while inputs and inputs[-1] == "":
        inputs.pop()
    proto = helper.make_node(n.op_type, inputs, [o.name for o in n.outputs], name=n.name or None,
                             domain=n.domain or None)
    schema = registry.schema_for(n.op_type, n.opset, n.domain)
    defaults = registry.schema_defaults(schema) if schema is not None else {}
    for key, value in n.attrs.items():
        if key in n.subgraphs:
            proto.attribute.append(helper.make_attribute(key, _graph(n.subgraphs[key])))
        elif value is not None and not _same(value, defaults.get(key, _MISSING)):
            kind = schema.attributes[key].type if schema is not None and key in schema.attributes else None
            proto.attribute.append(_attribute(key, value, kind))
    return proto


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """An attribute equal to its schema default is left out, as a model usually writes it."""
    if b is _MISSING:
        return False
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            a.shape == b.shape and bool(np.all(a == b))
    return a == b


def _attribute(key: str, value: Any, kind: Any) -> onnx.AttributeProto:
    if isinstance(value, np.ndarray):
        return helper.make_attribute(key, numpy_helper.from_array(value))
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list) and not value:  # the type of an empty list comes from the schema
        return helper.make_attribute(key, value, attr_type=kind or onnx.AttributeProto.INTS)
    return helper.make_attribute(key, value)
