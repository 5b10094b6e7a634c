"""Shape and dtype inference, and constant folding, node by node in topological order.

Both walk the graph once; folding also re-infers each node so that folded
values (e.g. a Reshape's computed shape) sharpen downstream shapes.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..dims import check_size, is_static, num_elements
from ..errors import ModelError, OnnxcError, ShapeError
from ..ir import Graph, Node
from ..ops.registry import InferContext
from . import evaluate

# Folding stops at outputs larger than this many elements: they would bloat weights.
FOLD_MAX_ELEMENTS = 1 << 22
# Integer tensors up to this size are evaluated even without folding: they are shape data.
SHAPE_VALUE_MAX_ELEMENTS = 64


def infer_node(graph: Graph, node: Node) -> None:
    ctx = InferContext(node, graph.dims)
    graph.dims.checks = []
    try:
        results = node.impl.infer(node, ctx)
    except ShapeError as e:
        if str(e).startswith(node.label):
            raise
        raise ShapeError(f"{node.label}: {e}") from e
    except OnnxcError:
        raise
    except Exception as e:  # a bug or a malformed attribute: report it against the node
        raise ShapeError(f"{node.label}: shape inference failed: {type(e).__name__}: {e}") from e
    if len(results) < len([o for o in node.outputs]):
        results = list(results) + [None] * (len(node.outputs) - len(results))
    for out, res in zip(node.outputs, results):
        if res is None:
            continue
        dtype, shape = res[0], res[1]
        kind = res[2] if len(res) > 2 else "tensor"   # containers say what they are
        out.kind = kind
        if not isinstance(dtype, dt.DType):
            raise ShapeError(f"{node.label}: inference gave no element type for {out.name!r}")
        for d in shape or ():
            if isinstance(d, int) and d < 0:
                raise ShapeError(f"{node.label}: output {out.name!r} would have negative dim {d}")
        check_size(shape or (), dtype.itemsize, f"{node.label}: output {out.name!r}")
        out.dtype, out.shape = dtype, (tuple(shape) if shape is not None else None)
    node.dim_checks = list(dict.fromkeys(graph.dims.checks))
    for i, out in enumerate(node.outputs):
        out.sym_value = ctx.sym_values.get(i)
    first = node.outputs[0] if node.outputs else None
    if first is not None and first.is_tensor and first.sym_value is None and first.dtype in (dt.INT64, dt.INT32) \
            and first.static \
            and num_elements(first.shape) <= SHAPE_VALUE_MAX_ELEMENTS:
        values = node.impl.dims_value(node, ctx)
        if values is not None:
            first.sym_value = tuple(np.asarray(values, dtype=object).reshape(-1).tolist())


def infer_shapes(graph: Graph) -> None:
    """Give every value a dtype and a shape using each op's own inference.

    Like ONNX's data propagation, small integer tensors computed from constants
    (shapes, axes, pads) are evaluated on the way: shapes depend on them.
    """
    _walk(graph, fold_all=False)


def fold_constants(graph: Graph) -> None:
    """Evaluate nodes whose inputs are all constant; Shape/Size of static values too."""
    _walk(graph, fold_all=True)


def _walk(graph: Graph, fold_all: bool) -> None:
    i = 0
    while i < len(graph.nodes):
        node = graph.nodes[i]
        i += 1
        _require_typed_inputs(node)
        inlined = node.impl.inline(node)
        if inlined is not None:
            # Control flow decided at compile time (an If on a constant): the node becomes the
            # nodes it would run, which are typed next, in place.
            nodes, results = inlined
            i -= 1
            graph.nodes[i:i + 1] = nodes
            for out, result in zip(node.outputs, results):
                graph.replace_uses(out, result)
            continue
        infer_node(graph, node)
        if not node.impl.foldable or any(o.const is not None for o in node.outputs):
            continue
        if node.op_type in ("Shape", "Size") and node.domain == "" and _fold_shape_query(node):
            continue
        if all(v is None or v.const is not None for v in node.inputs) and all(
                o.static and (num_elements(o.shape) <= (FOLD_MAX_ELEMENTS if fold_all else SHAPE_VALUE_MAX_ELEMENTS)
                              or fold_all and _packed_weights_only(graph, node, o))
                and (fold_all or o.dtype.is_int or o.dtype == dt.BOOL) for o in node.outputs):
            for out, array in zip(node.outputs, evaluate.run_node(node)):
                _set_const(node, out, array)
    graph.nodes = [n for n in graph.nodes if not all(o.const is not None for o in n.outputs)]


# Ops that read a constant B (input 1) only to pack it when compiling: a B folded for them is
# held only as that packed copy (as onnxruntime prepacks a constant B).
PACKING_READERS = ("MatMul", "Gemm")


def _packed_weights_only(graph: Graph, node: Node, out) -> bool:
    """Whether a large output of a Transpose of a constant is read only as the B of products,
    which pack it when compiling: folded, the weights hold its packed copy (as for any constant
    B), where left to run it transposes the whole tensor and packs it again on every run (a
    language model's head tied to its embedding, written Transpose(embedding) -> MatMul by
    torch's dynamo exporter: GPT-2's 50257 x 768, 320 ms a run)."""
    if node.op_type != "Transpose" or node.domain != "":
        return False
    readers = [n for n in graph.nodes if any(v is out for v in n.inputs)]
    return bool(readers) and out not in graph.outputs and all(
        n.domain == "" and n.op_type in PACKING_READERS and n.inputs[1] is out
        and all(v is not out for j, v in enumerate(n.inputs) if j != 1) for n in readers)


def _fold_shape_query(node: Node) -> bool:
    x = node.inputs[0]
    if not x.static:
        return False
    if node.op_type == "Size":
        _set_const(node, node.outputs[0], np.array(num_elements(x.shape), dtype=np.int64))
        return True
    shape = np.array(x.shape, dtype=np.int64)
    start = node.attrs.get("start", 0)
    end = node.attrs.get("end", None)
    _set_const(node, node.outputs[0], shape[slice(start, end)])
    return True


def _set_const(node: Node, out, array: np.ndarray) -> None:
    array = np.asarray(array, order="C")
    if out.dtype is not None and array.dtype != out.dtype.np and array.dtype.kind in "biuf" and out.dtype.np.kind in "biuf":
        array = array.astype(out.dtype.np)  # the spec (our inference) decides the type, not the evaluator
    if out.dtype is not None and array.dtype != out.dtype.np:
        raise ShapeError(f"{node.label}: folded value of {out.name!r} is {array.dtype}, inference said {out.dtype}")
    if out.shape is not None and is_static(out.shape) and tuple(array.shape) != tuple(out.shape):
        raise ShapeError(f"{node.label}: folded value of {out.name!r} has shape {array.shape}, "
                         f"inference said {out.shape}")
    out.const = array
    out.dtype, out.shape = dt.from_numpy(array.dtype), tuple(array.shape)


def _require_typed_inputs(node: Node) -> None:
    for v in node.inputs:
        if v is not None and (v.dtype is None or (v.shape is None and v.is_tensor)):
            raise ModelError(f"{node.label}: input {v.name!r} has no type (is the graph topologically sorted?)")
