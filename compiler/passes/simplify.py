"""Removal of nodes that only forward their input (Identity, inference-mode Dropout,
Reshape to the same shape, Cast to the same type), of repeated computations, and of
dead code; reductions that are a global pooling become one."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value, reads
from ..ops import _reduce
from ..ops.registry import InferContext, lookup

# Ops whose every run gives new values: two such nodes are never the same computation.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                    "Bernoulli", "Dropout"}


def _forwards_input(node: Node, consumers: dict[Value, list[Node]], graph_outputs: set[Value]) -> bool:
    if node.domain != "":
        return False
    x, y = node.inputs[0] if node.inputs else None, node.outputs[0]
    if x is None or x.dtype != y.dtype or x.shape != y.shape:
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type in ("Reshape", "Cast", "CastLike"):
        return True  # same dtype and shape: nothing to do
    if node.op_type == "Dropout":
        if node.version < 7 and not node.attrs.get("is_test", 0) and node.attrs.get("ratio", 0.5) != 0:
            return False   # training
        training = node.input(2)
        if training is not None and (training.const is None or bool(training.const)):
            return False
        mask_used = len(node.outputs) > 1 and (node.outputs[1] in consumers or node.outputs[1] in graph_outputs)
        return not mask_used
    return False


def remove_identity_like(graph: Graph) -> None:
    """Identity, inference Dropout, no-op Reshape/Cast: readers use the input directly."""
    consumers = graph.consumers()
    graph_outputs = set(graph.outputs)
    dead: set[Node] = set()
    for node in graph.nodes:
        if _forwards_input(node, consumers, graph_outputs):
            graph.replace_uses(node.outputs[0], node.inputs[0])
            dead.add(node)
    graph.remove_nodes(dead)


def eliminate_dead_code(graph: Graph) -> None:
    """Drop nodes none of whose outputs reach a graph output."""
    live = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            kept.append(node)
            live.update(reads(node))
    graph.nodes = kept[::-1]



def eliminate_common_subexpressions(graph: Graph) -> None:
    """A node that repeats an earlier one (same op, attributes and input values) is dropped;
    its readers read the earlier node's outputs (e.g. the same Shape -> Gather read by two
    branches, or one tensor transposed the same way twice)."""
    seen: dict[tuple, Node] = {}
    dead: set[Node] = set()
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx.ml") or node.subgraphs or node.op_type in NONDETERMINISTIC:
            continue
        key = (node.op_type, node.domain, node.version, tuple(node.inputs),
               tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items())), len(node.outputs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if any(a.dtype != b.dtype or a.shape != b.shape or a.kind != b.kind for a, b in zip(first.outputs, node.outputs)):
            continue
        for old, new in zip(node.outputs, first.outputs):
            graph.replace_uses(old, new)
        dead.add(node)
    if dead:
        graph.remove_nodes(dead)


def _attr_key(value: Any) -> Any:
    """An attribute value as something hashable that equal values share."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, float) and value != value:
        return ("nan",)
    try:
        hash(value)
        return value
    except TypeError:
        return ("repr", repr(value))


def global_pool_from_reduce_mean(graph: Graph) -> None:
    """ReduceMean of a float32 tensor over all its axes past the second, dims kept, is
    GlobalAveragePool: the squeeze-and-excitation blocks of the dynamo exporter's MobileNetV3,
    EfficientNet and RegNet write it so (the TorchScript exporter writes GlobalAveragePool),
    and the pooling kernel sums each plane in vector lanes where the general reduction keeps
    one running sum (a 16-channel 112x112 map: 108 -> 15 us)."""
    for i, node in enumerate(graph.nodes):
        if node.op_type != "ReduceMean" or node.domain or len(node.outputs) != 1:
            continue
        x = node.inputs[0]
        if x.dtype is not dt.FLOAT or x.shape is None or len(x.shape) < 3 or not node.attrs.get("keepdims", 1):
            continue
        rank = len(x.shape)
        if _reduce.node_axes(node, InferContext(node, graph.dims), rank).axes != list(range(2, rank)):
            continue
        opset = graph.opsets.get("", node.opset)
        pool = Node("GlobalAveragePool", "", node.name, [x], list(node.outputs), {}, opset=opset,
                    impl=lookup("", "GlobalAveragePool", opset),
                    version=onnx.defs.get_schema("GlobalAveragePool", opset).since_version)
        node.outputs[0].producer = pool
        graph.nodes[i] = pool
