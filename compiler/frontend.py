"""Frontend: an ONNX model (path, bytes or ModelProto) becomes a typed IR graph.

Steps: load (with external data) -> check -> inline local functions -> resolve
each domain's opset -> find every unsupported op (one error lists them all) ->
build values and nodes with typed attributes.
"""
from __future__ import annotations

import os
from typing import Union

import numpy as np
import onnx
import onnx.inliner
from onnx import numpy_helper

from . import dtypes as dt
from .errors import ModelError, UnsupportedError
from .ir import Graph, ModelMeta, Node, Value
from .ops import registry

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]


def load_model(source: ModelSource) -> onnx.ModelProto:
    """Load and check a model; external data is resolved next to a model file."""
    try:
        if isinstance(source, onnx.ModelProto):
            model = source
        elif isinstance(source, (bytes, bytearray, memoryview)):
            model = onnx.load_model_from_string(bytes(source))
        else:
            path = os.fspath(source)
            if not os.path.isfile(path):
                raise ModelError(f"model file not found: {path}")
            model = onnx.load(path, load_external_data=True)
    except ModelError:
        raise
    except Exception as e:  # protobuf decode errors, bad external data
        raise ModelError(f"cannot load the model: {e}") from e
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        # Ops the standard later deprecated (GroupNormalization-18 ...) are still valid in the
        # opsets they were written for; onnxruntime runs them, so do we.
        if "is deprecated in domain_version" not in str(e):
            raise ModelError(f"the model is not valid ONNX: {e}") from e
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    return model


def opset_map(model: onnx.ModelProto) -> dict[str, int]:
    out: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        out[domain] = int(imp.version)
    return out


def check_supported(model: onnx.ModelProto, opsets: dict[str, int]) -> None:
    """Raise one error that lists every (domain, op, opset) onnxc cannot compile."""
    missing: dict[tuple[str, str, int], list[str]] = {}
    for i, node in enumerate(model.graph.node):
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = opsets.get(domain)
        if opset is None or registry.lookup(domain, node.op_type, opset) is None:
            key = (domain or "ai.onnx", node.op_type, opset if opset is not None else -1)
            missing.setdefault(key, []).append(node.name or f"#{i}")
    if missing:
        lines = []
        for (domain, op, opset), names in sorted(missing.items()):
            shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            version = f"opset {opset}" if opset >= 0 else "no opset imported"
            lines.append(f"  {domain}::{op} ({version}): nodes {shown}")
        raise UnsupportedError("the model uses operators onnxc does not support:\n" + "\n".join(lines))


def _tensor_type(vi: onnx.ValueInfoProto, graph: Graph, where: str) -> tuple[dt.DType, tuple]:
    tt = vi.type
    if not tt.HasField("tensor_type"):
        raise UnsupportedError(f"{where} {vi.name!r}: only tensor inputs and outputs are supported")
    dtype = dt.from_onnx(tt.tensor_type.elem_type)
    if not tt.tensor_type.HasField("shape"):
        raise UnsupportedError(f"{where} {vi.name!r} has no shape (unknown rank)")
    shape = []
    for axis, d in enumerate(tt.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise ModelError(f"{where} {vi.name!r} has a negative dim {d.dim_value}")
            shape.append(int(d.dim_value))
        elif d.dim_param:
            shape.append(graph.dims.declare_input(d.dim_param, f"{vi.name}[{axis}]"))
        else:
            shape.append(graph.dims.declare_input(f"{vi.name}_dim{axis}", f"{vi.name}[{axis}]"))
    return dtype, tuple(shape)


def build_graph(model: onnx.ModelProto) -> Graph:
    opsets = opset_map(model)
    check_supported(model, opsets)
    g = model.graph
    graph = Graph(g.name or "main")
    graph.opsets = opsets
    graph.meta = ModelMeta(
        producer_name=model.producer_name, producer_version=model.producer_version,
        domain=model.domain, model_version=int(model.model_version), doc_string=model.doc_string,
        graph_name=g.name, graph_description=g.doc_string,
        custom_metadata_map={p.key: p.value for p in model.metadata_props},
    )
    by_name: dict[str, Value] = {}

    for init in g.initializer:
        try:
            array = numpy_helper.to_array(init)
        except Exception as e:
            raise ModelError(f"initializer {init.name!r} cannot be read: {e}") from e
        dt.from_onnx(init.data_type)
        v = graph.new_value(init.name, dt.from_onnx(init.data_type), tuple(array.shape), np.asarray(array, order="C"))
        by_name[init.name] = v
    if g.sparse_initializer:
        raise UnsupportedError("sparse initializers are not supported")

    for vi in g.input:
        if vi.name in by_name:
            continue  # an initializer listed as input (IR < 4 style): treated as constant
        dtype, shape = _tensor_type(vi, graph, "input")
        v = graph.new_value(vi.name, dtype, shape)
        graph.inputs.append(v)
        by_name[vi.name] = v

    for i, proto in enumerate(g.node):
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        opset = opsets[domain]
        label = f"{proto.op_type} node {proto.name!r}" if proto.name else f"{proto.op_type} node #{i}"
        inputs = []
        for name in proto.input:
            if not name:
                inputs.append(None)
                continue
            if name not in by_name:
                raise ModelError(f"{label}: input {name!r} is not produced by any earlier node or graph input")
            inputs.append(by_name[name])
        outputs = []
        for name in proto.output:
            if name in by_name:
                raise ModelError(f"{label}: output {name!r} is already defined")
            v = graph.new_value(name or f"{proto.op_type}_unused{i}")
            if name:
                by_name[name] = v
            outputs.append(v)
        schema = registry.schema_for(proto.op_type, opset, domain)
        attrs = registry.typed_attributes(proto, schema, label)
        node = Node(proto.op_type, domain, proto.name, inputs, outputs, attrs, opset,
                    registry.lookup(domain, proto.op_type, opset),
                    schema.since_version if schema is not None else opset)
        graph.add_node(node)

    for vi in g.output:
        if vi.name not in by_name:
            raise ModelError(f"graph output {vi.name!r} is not produced by any node")
        graph.outputs.append(by_name[vi.name])
        graph.output_names.append(vi.name)
        declared = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if declared is None:
            raise UnsupportedError(f"output {vi.name!r}: only tensor outputs are supported")
    return graph


def import_model(source: ModelSource) -> tuple[onnx.ModelProto, Graph]:
    model = load_model(source)
    return model, build_graph(model)
