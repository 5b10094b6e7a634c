"""Frontend: an ONNX model (path, bytes or ModelProto) becomes a typed IR graph.

Steps: load (with external data; a file's big initializers mapped, not copied:
compiler/mapped.py) -> check -> inline local functions -> resolve
each domain's opset -> find every unsupported op (one error lists them all) ->
build values and nodes with typed attributes.
"""
from __future__ import annotations

import logging
import math
import os
from collections import ChainMap
from typing import Optional, Union

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
import numpy as np
import onnx
import onnx.inliner
from onnx import external_data_helper, numpy_helper

from . import dtypes as dt, mapped
from .dims import check_size
from .errors import ModelError, ModelNotFound, ModelParseError, UnsupportedError
from .ir import Graph, ModelMeta, Node, Value
from .ops import registry

log = logging.getLogger("onnxc")

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]

# The newest opset of each standard domain the installed onnx package knows, from its release table.
STANDARD_OPSETS = {"": max(row[2] for row in onnx.helper.VERSION_TABLE),
                   "ai.onnx.ml": max(row[3] for row in onnx.helper.VERSION_TABLE if row[3] is not None)}


def load_model(source: ModelSource) -> onnx.ModelProto:
    """Load and check a model; external data is resolved next to a model file, never outside its folder."""
    folder = None
    serialized: Optional[bytes] = None   # the model's bytes as given, which the checker can take as they are
    marked = False   # whether tensors marked as mapped are onnxc's marks (not a file's claim to be)
    try:
        if isinstance(source, onnx.ModelProto):
            model = source
            marked = True   # (a model this function loaded, given again; mapped.array checks each mark)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            serialized = bytes(source)
            model = onnx.load_model_from_string(serialized)
        else:
            path = os.fspath(source)
            if not os.path.isfile(path):
                raise ModelNotFound(f"model file not found: {path}")
            # (big initializers stay in the file, mapped: compiler/mapped.py)
            model = mapped.load(os.path.abspath(path))
            marked = model is not None
            if model is None:
                with open(path, "rb") as f:
                    serialized = f.read()
                model = onnx.load_model_from_string(serialized)
            folder = os.path.dirname(os.path.abspath(path))
        if not marked:
            mapped.drop_claims(model)
        if _check_external_data(model, folder, marked):
            assert folder is not None   # (checked: only a model file has external data)
            mapped.map_external(model, folder)
            for tensor in external_data_helper._get_all_tensors(model):   # (as load_external_data_for_model)
                if external_data_helper.uses_external_data(tensor) and not mapped.is_mapped(tensor):
                    external_data_helper.load_external_data_for_tensor(tensor, folder)
                    tensor.data_location = onnx.TensorProto.DEFAULT
                    del tensor.external_data[:]
            serialized = None
    except ModelError:
        raise
    except DecodeError as e:
        raise ModelParseError(f"cannot load the model: {e}") from e
    except Exception as e:  # unreadable external data
        raise ModelError(f"cannot load the model: {e}") from e
    _check_text(model)
    try:
        seen = _as_checker_sees_it(model)
        # (the bytes as given when they are what the checker would see: serializing a model with
        # hundreds of megabytes of weights again takes a second)
        onnx.checker.check_model(serialized if seen is model and serialized is not None else seen)
    except Exception as e:
        # Ops the standard later deprecated (GroupNormalization-18 ...) are still valid in the
        # opsets they were written for; onnxruntime runs them, so do we.
        if "is deprecated in domain_version" not in str(e):
            raise ModelError(f"the model is not valid ONNX: {e}") from e
    _check_opsets(model)
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as e:
            raise ModelError(f"the model's functions cannot be inlined: {e}") from e
    return model


def _check_text(message: Message, where: str = "model") -> None:
    """Every string field holds UTF-8: protobuf hands a field that does not as bytes, which
    names, dims and doc strings are never expected to be."""
    if isinstance(message, onnx.TensorProto):
        # (ListFields would copy its raw_data, hundreds of megabytes for a language model's
        # weights: only its text and message fields are read)
        fields = [(f, getattr(message, f.name)) for f in message.DESCRIPTOR.fields
                  if f.type in (f.TYPE_STRING, f.TYPE_MESSAGE) and (_repeated(f) or message.HasField(f.name))]
    else:
        fields = message.ListFields()
    for field, value in fields:
        if field.type == field.TYPE_MESSAGE:
            for item in (value if _repeated(field) else [value]):
                _check_text(item, f"{where}.{field.name}")
        elif field.type == field.TYPE_STRING and any(
                isinstance(v, bytes) for v in (value if _repeated(field) else [value])):
            raise ModelError(f"the model is not valid ONNX: {where}.{field.name} is not UTF-8 text")


def _repeated(field: FieldDescriptor) -> bool:
    # (protobuf 7 dropped FieldDescriptor.label for is_repeated)
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return field.label == field.LABEL_REPEATED


# Ops onnxruntime registers in the ai.onnx domain although ONNX has no such op; its optimizer
# writes them (for T5 and Llama models).
ONNXRUNTIME_AI_ONNX_OPS = frozenset({"SimplifiedLayerNormalization"})


# Initializers of raw data with at least this many elements are shown to the checker without their data.
CHECKER_STAND_IN_ELEMENTS = 1 << 18


def _as_checker_sees_it(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` as onnx's checker is given it: the main graph's big initializers by stand-ins
    without data (their bytes are checked against their shapes when the graph is built, and a
    checker that is handed hundreds of megabytes of weights copies and parses them again, a
    second per half gigabyte), and onnxruntime's own ai.onnx ops in the main graph moved to a
    domain of their own so that the checker, which does not know them, treats them as custom ops."""
    ort_ops = any(n.op_type in ONNXRUNTIME_AI_ONNX_OPS and n.domain in ("", "ai.onnx") for n in model.graph.node)
    big = {i for i, t in enumerate(model.graph.initializer)   # (by elements: protobuf's ByteSize encodes)
           if mapped.is_mapped(t) or (t.HasField("raw_data") and CHECKER_STAND_IN_ELEMENTS <= math.prod(t.dims) < 1 << 31
                                      and min(t.dims) >= 0)}   # (shapes no data fits, the checker refuses as before)
    if not ort_ops and not big:
        return model
    copy = onnx.ModelProto()
    _copy_fields(model, copy, skip="graph")
    _copy_fields(model.graph, copy.graph, skip="initializer")
    for i, tensor in enumerate(model.graph.initializer):
        if i in big:   # (no elements, so no data: the checker sees its name and type)
            copy.graph.initializer.add(name=tensor.name, data_type=tensor.data_type, dims=[0])
        else:
            copy.graph.initializer.append(tensor)
    for n in copy.graph.node:
        if n.op_type in ONNXRUNTIME_AI_ONNX_OPS and n.domain in ("", "ai.onnx"):
            n.domain = "onnxruntime.ai_onnx"
    if ort_ops:
        copy.opset_import.append(onnx.helper.make_opsetid("onnxruntime.ai_onnx", 1))
    return copy


def _copy_fields(source: Message, target: Message, skip: str) -> None:
    """Every field of ``source`` but ``skip`` into ``target`` (a message of the same type)."""
    for field, value in source.ListFields():
        if field.name == skip:
            continue
        if _repeated(field):
            getattr(target, field.name).extend(value)
        elif field.message_type is not None:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def _check_external_data(model: onnx.ModelProto, folder: Optional[str], marked: bool) -> bool:
    """Every external data file is a regular file inside ``folder`` (links resolved) that holds
    the bytes the tensor names: a model cannot make onnxc read other files. Returns whether any
    tensor has external data. Where ``marked``, tensors marked as mapped are onnxc's own
    (compiler/mapped.py, which checks their file and bytes as it reads them); in a model's
    own file they are external data like any other."""
    found = False
    for tensor in _all_tensors(model.graph):
        if not external_data_helper.uses_external_data(tensor) or (marked and mapped.is_mapped(tensor)):
            continue
        found = True
        info = external_data_helper.ExternalDataInfo(tensor)
        where = f"tensor {tensor.name!r}: external data {info.location!r}"
        if folder is None:
            raise ModelError(f"{where}: a model given as bytes or a ModelProto has no folder to read external "
                             "data from; give the model's path")
        if not info.location or os.path.isabs(info.location):
            raise ModelError(f"{where} must be a path relative to the model's folder")
        root = os.path.realpath(folder)
        path = os.path.realpath(os.path.join(root, info.location))
        if os.path.commonpath([root, path]) != root:
            raise ModelError(f"{where} is outside the model's folder {folder}")
        if not os.path.isfile(path):
            raise ModelError(f"{where} is not a file in the model's folder")
        size = os.path.getsize(path)
        offset, length = info.offset or 0, info.length
        if offset < 0 or offset > size or (length is not None and (length < 0 or offset + length > size)):
            raise ModelError(f"{where}: offset {offset} and length {length} do not fit its {size} bytes")
    return found


def _all_tensors(graph: onnx.GraphProto):
    """Initializers and tensor attributes of ``graph`` and of its bodies."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _all_tensors(a.g)
            for g in a.graphs:
                yield from _all_tensors(g)


def _check_opsets(model: onnx.ModelProto) -> None:
    """One version per domain, and none newer than the onnx package defines for standard domains
    (their schemas would be read as the newest known, silently)."""
    seen: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        if seen.setdefault(domain, imp.version) != imp.version:
            raise ModelError(f"opset of {domain or 'ai.onnx'} imported twice: {seen[domain]} and {imp.version}")
        newest = STANDARD_OPSETS.get(domain)
        if newest is not None and imp.version > newest:
            raise UnsupportedError(f"opset {imp.version} of {domain or 'ai.onnx'} is newer than the newest the "
                                   f"installed onnx package defines ({newest})")


def opset_map(model: onnx.ModelProto) -> dict[str, int]:
    out: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        out[domain] = int(imp.version)
    return out


def op_inventory(model: onnx.ModelProto, opsets: dict[str, int]) -> dict[tuple[str, str, int], list[str]]:
    """(domain, op, opset) -> names of the nodes using it, control-flow bodies included."""
    used: dict[tuple[str, str, int], list[str]] = {}

    def scan(graph: onnx.GraphProto) -> None:
        for i, node in enumerate(graph.node):
            domain = "" if node.domain == "ai.onnx" else node.domain
            opset = opsets.get(domain)
            used.setdefault((domain, node.op_type, opset if opset is not None else -1), []).append(
                node.name or f"#{i}")
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    scan(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        scan(g)

    scan(model.graph)
    return used


def is_supported(domain: str, op: str, opset: int) -> bool:
    return opset >= 0 and registry.lookup(domain, op, opset) is not None


def check_supported(model: onnx.ModelProto, opsets: dict[str, int]) -> None:
    """Raise one error that lists every (domain, op, opset) onnxc cannot compile, bodies included."""
    missing = {key: names for key, names in op_inventory(model, opsets).items() if not is_supported(*key)}
    if missing:
        lines = []
        for (domain, op, opset), names in sorted(missing.items()):
            shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            version = f"opset {opset}" if opset >= 0 else "no opset imported"
            lines.append(f"  {domain or 'ai.onnx'}::{op} ({version}): nodes {shown}")
        raise UnsupportedError("the model uses operators onnxc does not support:\n" + "\n".join(lines))


def unnamed_dim_name(input_name: str, axis: int) -> str:
    """The symbol onnxc gives a dynamic input dim the model leaves unnamed: how the CLI's
    ``--dim`` and generated code name it. Sessions report such a dim as None, as onnxruntime."""
    return f"{input_name}_dim{axis}"


def input_dim_names(model: onnx.ModelProto) -> list[str]:
    """The names of the model's dynamic input dims, in order of first use: its own
    (``dim_param``) and those onnxc gives unnamed ones (``unnamed_dim_name``)."""
    inits = {i.name for i in model.graph.initializer}
    names: dict[str, None] = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if not (d.HasField("dim_value") and d.dim_value >= 0):
                names[_dim_symbol(d) or unnamed_dim_name(vi.name, axis)] = None
    return list(names)


def _dim_symbol(d: onnx.TensorShapeProto.Dimension) -> str:
    """A dim's own name ('' for none, or for placeholders such as '?' or '-1')."""
    return d.dim_param if d.dim_param.strip("?") and not d.dim_param.lstrip("-").isdigit() else ""


def _tensor_type(vi: onnx.ValueInfoProto, graph: Graph, where: str) -> tuple[dt.DType, tuple]:
    tt = vi.type
    if not tt.HasField("tensor_type"):
        raise UnsupportedError(f"{where} {vi.name!r}: only tensor inputs and outputs are supported")
    dtype = dt.from_onnx(tt.tensor_type.elem_type)
    if not tt.tensor_type.HasField("shape"):
        raise UnsupportedError(f"{where} {vi.name!r} has no shape (unknown rank)")
    shape = []
    for axis, d in enumerate(tt.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value < -1:  # -1: unknown, as some exporters write it
            raise ModelError(f"{where} {vi.name!r} has negative dim {d.dim_value} on axis {axis}")
        if d.HasField("dim_value") and d.dim_value >= 0:
            shape.append(int(d.dim_value))
        elif _dim_symbol(d):
            shape.append(graph.dims.declare_input(d.dim_param, f"{vi.name}[{axis}]"))
        else:
            shape.append(graph.dims.declare_input(unnamed_dim_name(vi.name, axis), f"{vi.name}[{axis}]", named=False))
    check_size(shape, dtype.itemsize, f"{where} {vi.name!r}")
    return dtype, tuple(shape)


def _value_type(tp: onnx.TypeProto, graph: Graph, name: str, where: str) -> tuple[str, dt.DType, Optional[tuple]]:
    """(kind, element type, shape) of a graph input or output: a tensor, a sequence of
    tensors or an optional of either. Element dims of containers vary per element: they
    are only described (symbols the compiled code never binds)."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        vi = onnx.helper.make_value_info(name, tp)
        dtype, shape = _tensor_type(vi, graph, where)
        return "tensor", dtype, shape
    if which == "sequence_type":
        elem = tp.sequence_type.elem_type
        if elem.WhichOneof("value") != "tensor_type":
            raise UnsupportedError(f"{where} {name!r}: only sequences of tensors are supported")
        return ("sequence",) + _element_type(elem.tensor_type, graph, name)
    if which == "optional_type":
        kind, dtype, shape = _value_type(tp.optional_type.elem_type, graph, name, where)
        if kind not in ("tensor", "sequence"):
            raise UnsupportedError(f"{where} {name!r}: nested optional types are not supported")
        if kind == "tensor":
            dtype, shape = _element_type(tp.optional_type.elem_type.tensor_type, graph, name)
        return ("optional" if kind == "tensor" else "optional_sequence"), dtype, shape
    raise UnsupportedError(f"{where} {name!r}: {which or 'untyped'} values are not supported")


MAP_KEYS = (dt.STRING, dt.INT64)
MAP_VALUES = (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.STRING)


def _map_type(mt: onnx.TypeProto.Map, name: str) -> tuple[dt.DType, dt.DType]:
    """(key type, value type) of a graph input map(K, tensor(V)): the ai.onnx.ml operators'
    maps, string or int64 keys to scalars."""
    value = mt.value_type
    if value.WhichOneof("value") != "tensor_type":
        raise UnsupportedError(f"input {name!r}: map values must be tensors, not {value.WhichOneof('value')}")
    key, elem = dt.from_onnx(mt.key_type), dt.from_onnx(value.tensor_type.elem_type)
    if key not in MAP_KEYS or elem not in MAP_VALUES:
        raise UnsupportedError(f"input {name!r}: map({key.type_string[7:-1]},{elem.type_string}) is not supported: "
                               "keys must be string or int64, values float, double, int64 or string")
    return key, elem


def _element_type(tt, graph: Graph, name: str) -> tuple[dt.DType, Optional[tuple]]:
    dtype = dt.from_onnx(tt.elem_type)
    if not tt.HasField("shape"):
        return dtype, None
    return dtype, tuple(int(d.dim_value) if d.HasField("dim_value") else graph.dims.data(f"{name} element", "e")
                        for d in tt.shape.dim)


def build_graph(model: onnx.ModelProto) -> Graph:
    opsets = opset_map(model)
    check_supported(model, opsets)
    g = model.graph
    if not g.output:
        # (onnxruntime loads such a model and its run returns nothing)
        raise ModelError("the graph has no outputs: there is nothing to compute")
    graph = Graph(g.name or "main")
    graph.opsets = opsets
    graph.meta = ModelMeta(
        producer_name=model.producer_name, producer_version=model.producer_version,
        domain=model.domain, model_version=int(model.model_version), doc_string=model.doc_string,
        graph_name=g.name, graph_description=g.doc_string,
        custom_metadata_map={p.key: p.value for p in model.metadata_props},
    )
    by_name: dict[str, Value] = {}
    _add_initializers(graph, g, by_name)

    for vi in g.input:
        if vi.name in by_name:
            continue  # an initializer listed as input (IR < 4 style): treated as constant
        if vi.type.WhichOneof("value") == "map_type":
            v = graph.new_value(vi.name, None, None)
            v.kind = "map"
            v.key_dtype, v.dtype = _map_type(vi.type.map_type, vi.name)
        else:
            kind, dtype, shape = _value_type(vi.type, graph, vi.name, "input")
            v = graph.new_value(vi.name, dtype, shape)
            v.kind = kind
        graph.inputs.append(v)
        by_name[vi.name] = v

    _add_nodes(graph, g, by_name)
    _add_outputs(graph, g, by_name, "graph")
    for vi in g.output:
        if vi.type.WhichOneof("value") not in ("tensor_type", "sequence_type", "optional_type"):
            raise UnsupportedError(f"output {vi.name!r}: only tensors, sequences and optionals are supported")
    return graph


def _add_outputs(graph: Graph, g: onnx.GraphProto, scope, where: str) -> None:
    for vi in g.output:
        if vi.name not in scope:
            raise ModelError(f"{where} output {vi.name!r} is not produced by any node")
        graph.outputs.append(scope[vi.name])
        graph.output_names.append(vi.name)


def _add_initializers(graph: Graph, g: onnx.GraphProto, by_name) -> None:
    for init in g.initializer:
        dtype = dt.from_onnx(init.data_type)
        check_size(tuple(init.dims), dtype.itemsize, f"initializer {init.name!r}")
        array = _initializer_array(init)
        v = graph.new_value(init.name, dtype, tuple(array.shape), np.asarray(array, order="C"))
        by_name[init.name] = v
    if g.sparse_initializer:
        raise UnsupportedError("sparse initializers are not supported")


def _initializer_array(init: onnx.TensorProto) -> np.ndarray:
    if mapped.is_mapped(init):
        return mapped.array(init)
    try:
        return numpy_helper.to_array(init)
    except Exception as e:
        raise ModelError(f"initializer {init.name!r} cannot be read: {e}") from e


def _add_nodes(graph: Graph, g: onnx.GraphProto, by_name) -> None:
    """Nodes of ``g`` in order; ``by_name`` also sees the enclosing graphs' values."""
    for i, proto in enumerate(g.node):
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        opset = graph.opsets[domain]
        label = f"{proto.op_type} node {proto.name!r}" if proto.name else f"{proto.op_type} node #{i}"
        inputs = []
        for name in proto.input:
            if not name:
                inputs.append(None)
                continue
            if name not in by_name:
                raise ModelError(f"{label}: input {name!r} is not produced by any earlier node or graph input")
            inputs.append(by_name[name])
        schema = registry.schema_for(proto.op_type, opset, domain)
        attrs = registry.typed_attributes(proto, schema, label)
        subgraphs = {}
        for a in proto.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                subgraphs[a.name] = _build_body(graph, a.g, by_name, f"{label} attribute {a.name!r}")
            elif a.type == onnx.AttributeProto.GRAPHS:
                raise UnsupportedError(f"{label}: graph-list attribute {a.name!r} is not supported")
        outputs = []
        for name in proto.output:
            local = by_name.maps[0] if isinstance(by_name, ChainMap) else by_name
            if name in local:
                raise ModelError(f"{label}: output {name!r} is already defined")
            v = graph.new_value(name or f"{proto.op_type}_unused{i}")
            if name:
                by_name[name] = v
            outputs.append(v)
        node = Node(proto.op_type, domain, proto.name, inputs, outputs, attrs, opset,
                    registry.lookup(domain, proto.op_type, opset),
                    schema.since_version if schema is not None else opset, subgraphs=subgraphs)
        graph.add_node(node)


def _build_body(outer: Graph, g: onnx.GraphProto, by_name, where: str) -> Graph:
    """A control-flow body: its own inputs and nodes; names of enclosing graphs stay visible.

    Its formal inputs keep the types the model declares (if any); the op that owns
    the body completes them during shape inference.
    """
    body = Graph(g.name or "body")
    body.opsets = outer.opsets
    body.dims = outer.dims           # one symbol table: bodies use the enclosing dims
    body._names = outer._names       # one namespace: C names stay unique and readable
    scope = ChainMap({}, by_name)
    _add_initializers(body, g, scope)
    for vi in g.input:
        dtype, kind = None, "tensor"
        which = vi.type.WhichOneof("value")
        if which == "tensor_type":
            if vi.type.tensor_type.elem_type:
                dtype = dt.from_onnx(vi.type.tensor_type.elem_type)
        elif which is not None:
            kind, dtype, _ = _value_type(vi.type, outer, vi.name, f"{where} input")
        v = body.new_value(vi.name, dtype, None)
        v.kind = kind
        body.inputs.append(v)
        scope[vi.name] = v
    _add_nodes(body, g, scope)
    _add_outputs(body, g, scope, where)
    return body


def fix_input_dims(model: onnx.ModelProto, overrides) -> onnx.ModelProto:
    """A copy of ``model`` whose symbolic input dims named (or denoted) in ``overrides`` --
    ("name" | "denotation", key, size) triples -- are those sizes. A dim the model leaves
    unnamed is matched by the name onnxc gives it (``unnamed_dim_name``)."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    by = {(kind, key): size for kind, key, size in overrides}
    used = set()
    inits = {i.name for i in fixed.graph.initializer}
    for vi in fixed.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                continue
            name = _dim_symbol(d) or unnamed_dim_name(vi.name, axis)
            for key in (("name", name), ("denotation", d.denotation)):
                if key[1] and key in by:
                    d.dim_value = by[key]  # replaces dim_param (a oneof)
                    used.add(key)
                    break
    for kind, key in set(by) - used:
        log.warning("free dimension override %s %r matches no input dim", kind, key)
    return fixed


def replace_initializers(model: onnx.ModelProto, values: dict) -> onnx.ModelProto:
    """A copy of ``model`` whose initializers named in ``values`` hold those arrays instead
    (SessionOptions.add_initializer); an array whose type or shape differs is refused."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    found = set()
    for i, init in enumerate(fixed.graph.initializer):
        if init.name in values:
            array = np.asarray(values[init.name])
            old = _initializer_array(init)
            if array.dtype != old.dtype or array.shape != old.shape:
                raise ModelError(f"initializer {init.name!r} is {old.dtype}{list(old.shape)}; the value given "
                                 f"is {array.dtype}{list(array.shape)}")
            fixed.graph.initializer[i].CopyFrom(numpy_helper.from_array(array, init.name))
            found.add(init.name)
    missing = set(values) - found
    if missing:
        raise ModelError(f"add_initializer: the model has no initializer named {sorted(missing)}")
    return fixed


def input_info(model: onnx.ModelProto) -> list[dict]:
    """The inputs as a manifest lists them: name, dtype, kind and shape (ints and dim names;
    ``shown_shape`` has None for the dims the model leaves unnamed, as sessions report them)."""
    graph = build_graph(model)
    out = []
    for v in graph.inputs:
        if v.kind == "map":
            out.append({"name": v.name, "dtype": v.dtype.name, "key_dtype": v.key_dtype.name, "shape": None,
                        "kind": "map"})
            continue
        if v.kind != "tensor":
            shape = None if v.shape is None else [d if isinstance(d, int) else None for d in v.shape]
            out.append({"name": v.name, "dtype": v.dtype.name, "shape": shape, "kind": v.kind})
            continue
        info = {"name": v.name, "dtype": v.dtype.name, "shape": list(v.shape), "kind": "tensor"}
        shown = [None if isinstance(d, str) and not graph.dims.defs[d].named else d for d in v.shape]
        out.append(info if shown == list(v.shape) else {**info, "shown_shape": shown})
    return out


def output_info(model: onnx.ModelProto, only: tuple = ()) -> list[dict]:
    """The outputs as declared: dims are ints, the model's dim names or None; the shape is None
    where the model gives none (its rank may be known only at run time)."""
    out = []
    for vi in model.graph.output:
        if only and vi.name not in only:
            continue
        tp = vi.type
        which = tp.WhichOneof("value")
        kind = {"tensor_type": "tensor", "sequence_type": "sequence", "optional_type": "optional"}.get(which)
        if kind is None:
            raise UnsupportedError(f"output {vi.name!r}: {which or 'untyped'} values are not supported")
        tt = tp.tensor_type if kind == "tensor" else None
        if kind == "sequence":
            tt = tp.sequence_type.elem_type.tensor_type
        elif kind == "optional":
            elem = tp.optional_type.elem_type
            kind = "optional" if elem.WhichOneof("value") == "tensor_type" else "optional_sequence"
            tt = elem.tensor_type if kind == "optional" else elem.sequence_type.elem_type.tensor_type
        shape = None
        if kind == "tensor" and tt.HasField("shape"):
            shape = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else (_dim_symbol(d) or None)
                     for d in tt.shape.dim]
        out.append({"name": vi.name, "dtype": dt.from_onnx(tt.elem_type).name, "shape": shape, "kind": kind})
    return out


def specialise_inputs(model: onnx.ModelProto, shapes, values) -> onnx.ModelProto:
    """A copy of ``model`` for one input signature: the inputs named in ``shapes`` --
    (name, dims) pairs -- get those dims, and those in ``values`` -- (name, dtype name, dims,
    elements) -- become initializers holding those elements (the model then has no such
    input). The signature comes from a feed the session has checked against the model."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    dims_of = {name: tuple(dims) for name, dims in shapes}
    value_of = {name: np.asarray(elements, dtype=dt.by_name(dtype).np).reshape(dims)
                for name, dtype, dims, elements in values}
    kept = []
    for vi in fixed.graph.input:
        if vi.name in value_of:
            fixed.graph.initializer.append(numpy_helper.from_array(value_of.pop(vi.name), vi.name))
            dims_of.pop(vi.name, None)
            continue
        dims = dims_of.pop(vi.name, None)
        if dims is not None and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            if len(shape.dim) != len(dims):
                raise ModelError(f"input {vi.name!r} has rank {len(shape.dim)}, the signature {len(dims)}")
            for d, size in zip(shape.dim, dims):
                d.dim_value = int(size)   # replaces dim_param (a oneof)
        kept.append(vi)
    if dims_of or value_of:
        raise ModelError(f"the model has no input named {sorted(set(dims_of) | set(value_of))}")
    del fixed.graph.input[:]
    fixed.graph.input.extend(kept)
    return fixed


def import_model(source: ModelSource) -> tuple[onnx.ModelProto, Graph]:
    model = load_model(source)
    return model, build_graph(model)
