"""Removal of nodes that only forward their input (Identity, inference-mode Dropout,
Reshape to the same shape, Cast to the same type), of repeated computations, and of
dead code."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph, Node, Value, reads

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


def trim_padding_taps(graph: Graph) -> None:
    """Kernel taps of a Conv (constant weights, static sizes, explicit pads) that read only
    padding at every output position are dropped: the weights keep the taps some output reads,
    and the pads shrink by what was dropped, so the output is the same. A 3x3 convolution
    dilated by 36 over a 33x33 map (DeepLabV3's widest ASPP branch) is a 1x1 one: its other
    eight taps would multiply zeros."""
    for node in graph.nodes:
        if node.op_type != "Conv" or node.domain or node.attrs.get("auto_pad", "NOTSET") != "NOTSET":
            continue
        x, w, y = node.inputs[0], node.input(1), node.outputs[0]
        if w is None or w.const is None or x.shape is None or y.shape is None or len(x.shape) < 3 \
                or w.const.ndim != len(x.shape):
            continue
        rank = len(x.shape) - 2
        in_dims, out_dims, kernel = x.shape[2:], y.shape[2:], w.const.shape[2:]
        if not all(isinstance(d, int) and d > 0 for d in (*in_dims, *out_dims)):
            continue
        strides = list(node.attrs.get("strides", [1] * rank))
        dilations = list(node.attrs.get("dilations", [1] * rank))
        pads = list(node.attrs.get("pads", [0] * (2 * rank)))
        if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
            continue
        keep, new_pads, new_dilations = [], list(pads), list(dilations)
        for a in range(rank):
            s, d, begin = strides[a], dilations[a], pads[a]
            # tap t reads input positions t * d - begin + o * s for o < out: some inside [0, in)?
            taps = [t for t in range(kernel[a])
                    if t * d - begin <= in_dims[a] - 1 and (out_dims[a] - 1) * s + t * d - begin >= 0]
            if not taps:
                break
            first, last = taps[0], taps[-1]
            new_pads[a] = begin - first * d
            new_pads[a + rank] = pads[a + rank] - (kernel[a] - 1 - last) * d
            if last == first:
                new_dilations[a] = 1
            keep.append(slice(first, last + 1))
        if len(keep) != rank or min(new_pads) < 0 or all(k.stop - k.start == n for k, n in zip(keep, kernel)):
            continue
        trimmed = np.ascontiguousarray(w.const[(slice(None), slice(None), *keep)])
        node.inputs = [x, graph.new_value(w.name + "_taps", w.dtype, tuple(trimmed.shape), trimmed), *node.inputs[2:]]
        node.attrs = {**node.attrs, "pads": new_pads, "dilations": new_dilations,
                      "kernel_shape": list(trimmed.shape[2:])}
