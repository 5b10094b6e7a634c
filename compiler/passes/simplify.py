"""Removal of nodes that only forward their input: Identity, inference-mode Dropout,
Reshape to the same shape, Cast to the same type."""
from __future__ import annotations

from ..ir import Graph, Node, reads


def _forwards_input(node: Node, consumers: dict[int, list[Node]], graph_outputs: set[int]) -> bool:
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
        training = node.input(2)
        if training is not None and (training.const is None or bool(training.const)):
            return False
        mask_used = len(node.outputs) > 1 and (id(node.outputs[1]) in consumers or id(node.outputs[1]) in graph_outputs)
        return not mask_used
    return False


def remove_identity_like(graph: Graph) -> None:
    """Identity, inference Dropout, no-op Reshape/Cast: readers use the input directly."""
    consumers = graph.consumers()
    graph_outputs = {id(v) for v in graph.outputs}
    dead: set[int] = set()
    for node in graph.nodes:
        if _forwards_input(node, consumers, graph_outputs):
            graph.replace_uses(node.outputs[0], node.inputs[0])
            dead.add(id(node))
    graph.remove_nodes(dead)


def eliminate_dead_code(graph: Graph) -> None:
    """Drop nodes none of whose outputs reach a graph output."""
    live = {id(v) for v in graph.outputs}
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(id(o) in live for o in node.outputs):
            kept.append(node)
            live.update(id(v) for v in reads(node))
    graph.nodes = kept[::-1]

