"""The channels-blocked layout (compiler/ops/blocked_conv.py) for chains of convolutions.

Convolutions that can run blocked (float32, 2-D, one group, dilation 1, constant weights,
static sizes, input and output channels multiples of BLOCK) are grouped into chains: two are
in one chain where one reads the other's output (as its input or its residual) or both read
the same tensor. A chain runs blocked where its work pays for the reorders at its borders:
each tensor entering the chain is reordered into the blocked layout once, each result read
outside it back to NCHW once (a Transpose between Reshapes, the copy kernels' tiled
transposition). ResNets become one chain from the first block to the last; a MobileNet's
pointwise convolutions, each between depthwise ones, stay as they are.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value
from ..ops.blocked_conv import BLOCK, FROM_BLOCKED, TO_BLOCKED, BlockedConv, macs
from ..ops.registry import lookup
from .infer import infer_node

# A 3x3 convolution of stride 1 with at least this many input and output channels, over a map
# of at least WINOGRAD_MIN_POSITIONS outputs, stays in NCHW for Winograd's kernel: 96 -> 96
# channels over 52 x 52 took 1.86 ms by Winograd, 2.70 ms blocked (32 -> 32 over 56 x 56: 0.34
# and 0.37; 128 -> 128 over 14 x 14, 0.30 and 0.36, where the chain's reorders would cost more).
WINOGRAD_MIN_CHANNELS = 96
WINOGRAD_MIN_POSITIONS = 400
# A chain runs blocked where its multiply-adds are at least this many per value reordered at
# its borders (a reorder moves a value in about the time of 50 multiply-adds, and blocking saves 10-25% of them).
MIN_MACS_PER_REORDERED = 400


def _pads(node: Node) -> Optional[list[int]]:
    """The explicit pads (begins, ends) of a 2-D Conv with static sizes, or None."""
    x, y = node.inputs[0].shape, node.outputs[0].shape
    kh, kw = node.inputs[1].const.shape[2:]
    sh, sw = node.attrs.get("strides", (1, 1))
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", "VALID"):
        pads = list(node.attrs.get("pads", (0, 0, 0, 0))) if auto_pad == "NOTSET" else [0, 0, 0, 0]
    else:
        pads = []
        for a, k, s in ((0, kh, sh), (1, kw, sw)):
            total = max(0, (y[2 + a] - 1) * s + k - x[2 + a])
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads.append((begin, total - begin))
        pads = [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]
    return pads if len(pads) == 4 and min(pads) >= 0 else None


def _blockable(node: Node) -> bool:
    if node.op_type not in ("Conv", "FusedConv") or node.domain not in ("", "onnxc"):
        return False
    if node.op_type == "Conv" and node.domain:
        return False
    x, w, y = node.inputs[0], node.input(1), node.outputs[0]
    if x.dtype is not dt.FLOAT or y.dtype is not dt.FLOAT or w is None or w.const is None or w.const.ndim != 4:
        return False
    if x.shape is None or y.shape is None or len(x.shape) != 4 or not x.static or not y.static:
        return False
    b = node.input(2)
    if b is not None and b.const is None:
        return False
    if node.attrs.get("group", 1) != 1 or any(d != 1 for d in node.attrs.get("dilations", (1, 1))):
        return False
    if x.shape[1] % BLOCK or y.shape[1] % BLOCK or w.const.shape[1] != x.shape[1]:
        return False
    z = node.input(3)
    if z is not None and (z.shape is None or tuple(z.shape) != tuple(y.shape)):
        return False
    if w.const.shape[2:] == (3, 3) and tuple(node.attrs.get("strides", (1, 1))) == (1, 1) \
            and min(x.shape[1], y.shape[1]) >= WINOGRAD_MIN_CHANNELS \
            and y.shape[2] * y.shape[3] >= WINOGRAD_MIN_POSITIONS:
        return False
    return _pads(node) is not None


def _chains(graph: Graph, convs: list[Node]) -> list[list[Node]]:
    parent = {n: n for n in convs}

    def root(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    readers: dict[Value, Node] = {}
    producers = {n.outputs[0]: n for n in convs}
    for n in convs:
        for v in (n.inputs[0], n.input(3)):
            if v is None:
                continue
            for other in ([producers[v]] if v in producers else []) + ([readers[v]] if v in readers else []):
                parent[root(n)] = root(other)
            readers.setdefault(v, n)
    groups: dict[Node, list[Node]] = {}
    for n in convs:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def blocked_conv_layout(graph: Graph) -> None:
    """Chains of convolutions that pay for it run in the channels-blocked layout."""
    opset = graph.opsets.get("")
    if opset is None or opset < 5:   # (Reshape's shape is an input from opset 5)
        return
    convs = [n for n in graph.nodes if _blockable(n)]
    if not convs:
        return
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    chosen: set[Node] = set()
    for chain in _chains(graph, convs):
        members = set(chain)
        made = {n.outputs[0] for n in chain}
        entering = {v for n in chain for v in (n.inputs[0], n.input(3)) if v is not None and v not in made}
        leaving = {v for v in made if v in outputs or any(c not in members for c in consumers.get(v, []))}
        moved = sum(int(np.prod(v.shape)) for v in entering | leaving)
        if sum(macs(n) for n in chain) >= MIN_MACS_PER_REORDERED * max(1, moved):
            chosen |= members
    if not chosen:
        return
    blocked: dict[Value, Value] = {}   # NCHW value -> its blocked twin
    new_nodes: list[Node] = []

    def make(op_type: str, inputs: list[Optional[Value]], output: Value, attrs: dict, name: str) -> Node:
        node = Node(op_type, "", graph.unique_name(name), inputs, [output], attrs, opset=opset,
                    impl=lookup("", op_type, opset), version=onnx.defs.get_schema(op_type, opset).since_version)
        output.producer = node
        infer_node(graph, node)
        new_nodes.append(node)
        return node

    def shape_const(name: str, dims) -> Value:
        array = np.array(dims, np.int64)
        return graph.new_value(name, dt.INT64, (len(dims),), array)

    def to_blocked(v: Value) -> Value:
        if v not in blocked:
            n, c, h, w = v.shape
            split = graph.new_value(v.name + "_split")
            make("Reshape", [v, shape_const(v.name + "_split_shape", (n, c // BLOCK, BLOCK, h, w))], split, {},
                 v.name + "/to_blocked_reshape")
            out = graph.new_value(v.name + "_blocked")
            make("Transpose", [split], out, {"perm": list(TO_BLOCKED)}, v.name + "/to_blocked")
            blocked[v] = out
        return blocked[v]

    for node in graph.nodes:
        if node not in chosen:
            new_nodes.append(node)
            continue
        y = node.outputs[0]
        inputs = [to_blocked(node.inputs[0]), node.inputs[1], node.input(2)]
        if node.input(3) is not None:
            inputs.append(to_blocked(node.inputs[3]))
        kh, kw = node.inputs[1].const.shape[2:]
        attrs = {"kernel_shape": (kh, kw), "strides": tuple(node.attrs.get("strides", (1, 1))),
                 "pads": tuple(_pads(node)), "activation": node.attrs.get("activation", ""),
                 "activation_params": tuple(node.attrs.get("activation_params", ()))}
        yb = graph.new_value(y.name + "_blocked")
        conv = Node("BlockedConv", "onnxc", node.name, inputs, [yb], attrs, opset=1, impl=BlockedConv(),
                    version=1, memo=dict(node.memo))
        yb.producer = conv
        infer_node(graph, conv)
        new_nodes.append(conv)
        blocked[y] = yb
        if y in outputs or any(c not in chosen for c in consumers.get(y, [])):
            split = graph.new_value(y.name + "_nchw_split")
            make("Transpose", [yb], split, {"perm": list(FROM_BLOCKED)}, y.name + "/from_blocked")
            make("Reshape", [split, shape_const(y.name + "_nchw_shape", y.shape)], y, {},
                 y.name + "/from_blocked_reshape")
    graph.nodes = new_nodes

