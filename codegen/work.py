"""How much work one run of a graph is, estimated from its static shapes, and whether it is
too little to split between threads.

A model that runs in well under a millisecond (PP-OCR's direction classifier: 16M
multiply-adds) was slower with 2 threads than with 1 even with every kernel's own threshold:
each split kernel leaves its output in two cores' caches, and the next kernel, split or not,
reads half of it from the other core. Below ``SERIAL_WORK`` a build for several threads runs
every node on the calling thread (no pool), as a 1-thread build does.
"""
from __future__ import annotations

import math
from typing import Optional

from ..compiler.ir import Graph, Node

# multiply-adds plus elements written: PP-OCR's classifier ~19M (0.4 ms at one thread, slower at
# two), openWakeWord's embedding model ~43M (0.9 ms, faster at two)
SERIAL_WORK = 32 << 20

# ops whose work is the output's elements times the reduced length of a product
_CONVS = {"Conv", "FusedConv", "ConvInteger", "QLinearConv", "NhwcConv"}
_PRODUCTS = {"MatMul", "FusedMatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
             "DynamicQuantizeMatMul", "QGemm", "MatMulNBits"}
# ops whose work the output does not tell (recurrences, attention, loops, contractions)
_UNKNOWN = ("LSTM", "GRU", "RNN", "Attention", "Einsum", "Loop", "Scan", "If", "ConvTranspose",
            "DeformConv", "Col2Im", "Unique", "NonMaxSuppression", "TopK")


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape)


def _node_work(node: Node) -> Optional[int]:
    if node.subgraphs or any(word in node.op_type for word in _UNKNOWN):
        return None
    outs = [v for v in node.outputs if v is not None and v.is_tensor]
    if any(not v.static for v in outs):
        return None
    written = sum(_numel(v.shape) for v in outs)
    if node.op_type in _CONVS:
        w = node.inputs[3] if node.op_type == "QLinearConv" else node.inputs[1]
        if w is None or not w.static or len(w.shape) < 2:
            return None
        return written * _numel(w.shape[1:]) + written
    if node.op_type in _PRODUCTS:
        a = node.inputs[0]
        if a is None or not a.static or not a.shape:
            return None
        k = a.shape[0] if node.op_type == "Gemm" and node.attrs.get("transA", 0) else a.shape[-1]
        return written * int(k) + written
    return written


def model_work(graph: Graph) -> Optional[int]:
    """Multiply-adds of the products and convolutions plus the elements every node writes;
    None where a shape is not static or a node's work is not known from its shapes."""
    total = 0
    for node in graph.nodes:
        work = _node_work(node)
        if work is None:
            return None
        total += work
    return total
