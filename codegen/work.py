"""How much work one run of a graph is, estimated from its static shapes, and whether it is
too little to split between threads.

A model that runs in well under a millisecond (PP-OCR's direction classifier: 16M
multiply-adds) was slower with 2 threads than with 1 even with every kernel's own threshold:
each split kernel leaves its output in two cores' caches, and the next kernel, split or not,
reads half of it from the other core. Below ``SERIAL_WORK`` a build for several threads runs
every node on the calling thread (no pool), as a 1-thread build does, unless one node is a large
share of that by itself or a matrix-vector product streams large weights (below).
"""
from __future__ import annotations

import math
from typing import Optional

from ..compiler import dtypes as dt
from ..compiler.ir import Graph, Node
from ..compiler.ops._gemm import FEW_ROWS

# multiply-adds plus elements written: PP-OCR's classifier ~19M (0.4 ms at one thread, slower at
# two), openWakeWord's embedding model ~43M (0.9 ms, faster at two)
SERIAL_WORK = 32 << 20

# ... unless one node is at least this share of the threshold by itself: its split (a 256 x 256 x
# 256 MatMul, 17M multiply-adds: 163 -> 253-273 GFLOP/s at 2 threads, Sapphire Rapids) gains more
# than its neighbours lose to reading its output from two caches. (PP-OCR's classifier, 16M in
# all, has no node above 1.3M.)
LARGE_NODE_SHARE = 4

# ... or a matrix-vector product (fewer than FEW_ROWS rows) of constant weights streams at
# least this many floats of them from memory each run: the float32 GEMM's own threshold for such
# products (ONNXC_PARALLEL_MIN_MACS / 8). Two cores stream them faster than one, and the product
# leaves only a vector in the other core's cache: a 784-512-256-10 MLP at batch 1 took 0.043 ms
# at 2 threads on one, 0.015 split (Sapphire Rapids).
STREAMED_WEIGHTS_SPLIT = 1 << 18

# ops whose work is the output's elements times the reduced length of a product
_CONVS = {"Conv", "FusedConv", "BlockedConv", "ConvInteger", "QLinearConv", "NhwcConv"}
_PRODUCTS = {"MatMul", "FusedMatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
             "DynamicQuantizeMatMul", "QGemm", "MatMulNBits"}
# ops whose work the output does not tell (recurrences of other domains, attention, loops,
# contractions)
_UNKNOWN = ("LSTM", "GRU", "RNN", "Attention", "Einsum", "Loop", "Scan", "If", "ConvTranspose",
            "DeformConv", "Col2Im", "Unique", "NonMaxSuppression", "TopK")


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape)


# recurrences whose work their weights' shapes tell (W's rows: the gates of every hidden unit)
_RECURRENT = ("LSTM", "GRU", "RNN")


def _node_work(node: Node) -> Optional[int]:
    if node.op_type == "If" and not node.domain and set(node.subgraphs) == {"then_branch", "else_branch"}:
        # the branch taken: at most the larger of the two (silero VAD's sample-rate switch)
        branches = [model_work(body) for body in node.subgraphs.values()]
        return None if any(b is None for b in branches) else max(branches)
    recurrent = node.op_type in _RECURRENT and not node.domain
    if not recurrent and (node.subgraphs or any(word in node.op_type for word in _UNKNOWN)):
        return None
    outs = [v for v in node.outputs if v is not None and v.is_tensor]
    if any(not v.static for v in outs):
        return None
    written = sum(_numel(v.shape) for v in outs)
    if recurrent:
        macs = _recurrent_macs(node)
        return None if macs is None else macs + written
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


def _recurrent_macs(node: Node) -> Optional[int]:
    """An LSTM, GRU or RNN node's multiply-adds: every step's products of X by W and of the
    state by R, for each direction; None where a shape is not static."""
    x, w, r = (node.inputs[i] if len(node.inputs) > i else None for i in range(3))
    if any(v is None or not v.static or len(v.shape) != 3 for v in (x, w, r)):
        return None
    steps, batch = (x.shape[1], x.shape[0]) if node.attrs.get("layout", 0) else (x.shape[0], x.shape[1])
    directions, rows = int(w.shape[0]), int(w.shape[1])   # rows: gates times hidden units
    return int(steps) * int(batch) * directions * rows * (int(w.shape[2]) + int(r.shape[2]))


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


def _streams_weights(node: Node) -> bool:
    """Whether ``node`` is a matrix-vector product (fewer than FEW_ROWS rows, static shapes)
    of at least STREAMED_WEIGHTS_SPLIT floats of constant weights."""
    if node.op_type not in ("MatMul", "FusedMatMul", "Gemm") or len(node.inputs) < 2 or not node.outputs:
        return False
    b, y = node.inputs[1], node.outputs[0]
    if b is None or b.const is None or y is None or not y.static or not y.shape \
            or b.dtype is not dt.FLOAT or y.dtype is not dt.FLOAT:
        return False
    rows = _numel(y.shape) // max(1, int(y.shape[-1]))
    return rows < FEW_ROWS and _numel(b.shape) >= STREAMED_WEIGHTS_SPLIT


def serial_work(graph: Graph, min_work: int) -> Optional[int]:
    """The graph's work where a build for several threads is better run on the calling
    thread: under ``min_work``, no node a LARGE_NODE_SHARE-th of that by itself and no
    matrix-vector product streaming large weights; None otherwise (or where a node's work is
    not known)."""
    total = largest = 0
    for node in graph.nodes:
        work = _node_work(node)
        if work is None or _streams_weights(node):
            return None
        total += work
        largest = max(largest, work)
    if total >= min_work or largest * LARGE_NODE_SHARE >= min_work:
        return None
    return total
