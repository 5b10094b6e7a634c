"""The channels-blocked layout (compiler/ops/blocked_conv.py) for chains of convolutions.

Convolutions that can run blocked (float32, 2-D, one group, dilation 1, constant weights,
static sizes, output channels a multiple of BLOCK, input channels too or at most
NCHW_INPUT_MAX_CHANNELS) and MaxPool and AveragePool of floor mode over such channels are
grouped into chains: two are in one chain where one reads the other's output (as its input or
its residual) or both read the same tensor. A chain runs blocked where its work pays for the
reorders at its borders: each tensor entering the chain is reordered into the blocked layout
once, each result read outside it back to NCHW once (a Transpose between Reshapes, the copy
kernels' tiled transposition). A ResNet becomes one chain from its stem to its last block; a
MobileNet's pointwise convolutions, each between depthwise ones, stay as they are.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value
from ..ops.blocked_conv import BLOCK, FROM_BLOCKED, TO_BLOCKED, BlockedConv, macs
from ..errors import ShapeError
from ..ops._conv_pool import pads_c, window
from ..ops.blocked_pool import BlockedPool
from ..ops.registry import lookup
from .infer import infer_node

# A 3x3 convolution of stride 1 with at least this many input and output channels, over a map
# of at least WINOGRAD_MIN_POSITIONS outputs, stays in NCHW for Winograd's kernel: 96 -> 96
# channels over 52 x 52 took 1.86 ms by Winograd, 2.70 ms blocked (32 -> 32 over 56 x 56: 0.34
# and 0.37; 128 -> 128 over 14 x 14, 0.30 and 0.36, where the chain's reorders would cost more).
WINOGRAD_MIN_CHANNELS = 96
WINOGRAD_MIN_POSITIONS = 400
# A convolution of fewer input channels than a block (a network's first, over an image's 3)
# reads its NCHW input as it is (one channel per block) and writes blocks, like onnxruntime's
# NCHWc kernel for a first convolution: no im2col, and the next pool runs blocked too.
NCHW_INPUT_MAX_CHANNELS = 4
# A chain runs blocked where its multiply-adds are at least this many per value reordered at
# its borders (a reorder moves a value in about the time of 50 multiply-adds, and blocking saves 10-25% of them).
MIN_MACS_PER_REORDERED = 400
# ... and at least this many in all: below, the NCHW kernels tuned for small maps win (a CIFAR-sized
# CNN of 2.8M multiply-adds: 0.048 ms in NCHW, 0.052 blocked).
MIN_CHAIN_MACS = 8 << 20


def _pads(node: Node, kernel) -> Optional[list[int]]:
    """The explicit pads (begins, ends) of a 2-D Conv or pool with static sizes (auto_pad
    resolved as the NCHW kernels do), or None."""
    x, y = node.inputs[0].shape, node.outputs[0].shape
    try:
        win = window(node, 2, kernel, ShapeError)
    except ShapeError:
        return None
    begins, ends = pads_c(win, x[2:], y[2:])
    pads = [*begins, *ends]
    if min(pads) < 0:
        return None
    # (the blocked kernels compute the floor-mode output size: it must be the node's)
    for a in range(2):
        if (x[2 + a] + pads[a] + pads[a + 2] - kernel[a]) // win.strides[a] + 1 != y[2 + a]:
            return None
    return pads


def _static_float(node: Node) -> bool:
    x, y = node.inputs[0], node.outputs[0]
    return x.dtype is dt.FLOAT and y.dtype is dt.FLOAT and x.shape is not None and y.shape is not None \
        and len(x.shape) == 4 and x.static and y.static and len(y.shape) == 4


def _conv_input(node: Node) -> Optional[str]:
    """How a Conv or FusedConv can run blocked: "blocked" (input channels a multiple of BLOCK),
    "nchw" (a first convolution of a few channels, read as they are), or None."""
    if node.op_type not in ("Conv", "FusedConv") or node.domain != ("" if node.op_type == "Conv" else "onnxc"):
        return None
    w = node.input(1)
    if not _static_float(node) or w is None or w.const is None or w.const.ndim != 4 or node.input(4) is not None:
        return None   # (a prologue's kernel reads X in NCHW)
    x, y = node.inputs[0], node.outputs[0]
    b = node.input(2)
    if b is not None and b.const is None:
        return None
    if node.attrs.get("group", 1) != 1 or any(d != 1 for d in node.attrs.get("dilations", (1, 1))):
        return None
    if y.shape[1] % BLOCK or w.const.shape[1] != x.shape[1]:
        return None
    z = node.input(3)
    if z is not None and (z.shape is None or tuple(z.shape) != tuple(y.shape)):
        return None
    if w.const.shape[2:] == (3, 3) and tuple(node.attrs.get("strides", (1, 1))) == (1, 1) \
            and min(x.shape[1], y.shape[1]) >= WINOGRAD_MIN_CHANNELS \
            and y.shape[2] * y.shape[3] >= WINOGRAD_MIN_POSITIONS:
        return None
    if _pads(node, w.const.shape[2:]) is None:
        return None
    if x.shape[1] % BLOCK == 0:
        return "blocked"
    return "nchw" if x.shape[1] <= NCHW_INPUT_MAX_CHANNELS else None


def _poolable(node: Node) -> bool:
    """A 2-D MaxPool (no Indices, no dilation) or AveragePool of floor mode over channels a
    multiple of BLOCK."""
    if node.domain or node.op_type not in ("MaxPool", "AveragePool") or not _static_float(node):
        return False
    if len(node.outputs) > 1 and node.outputs[1] is not None or node.attrs.get("ceil_mode", 0):
        return False
    kernel = tuple(node.attrs.get("kernel_shape", ()))
    if len(kernel) != 2 or any(d != 1 for d in node.attrs.get("dilations", (1, 1))):
        return False
    pads = _pads(node, kernel)
    return node.inputs[0].shape[1] % BLOCK == 0 and pads is not None \
        and max(pads[0], pads[2]) < kernel[0] and max(pads[1], pads[3]) < kernel[1]


def _chains(nodes: list[Node], nchw_input: set[Node]) -> list[list[Node]]:
    """The nodes grouped by the blocked tensors they would share."""
    parent = {n: n for n in nodes}

    def root(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    readers: dict[Value, Node] = {}
    producers = {n.outputs[0]: n for n in nodes}
    for n in nodes:
        for i, v in enumerate(n.inputs[:4]):
            if v is None or i not in (0, 3) or (i == 0 and n in nchw_input and v not in producers):
                continue
            for other in ([producers[v]] if v in producers else []) + ([readers[v]] if v in readers else []):
                parent[root(n)] = root(other)
            readers.setdefault(v, n)
    groups: dict[Node, list[Node]] = {}
    for n in nodes:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def blocked_conv_layout(graph: Graph) -> None:
    """Chains of convolutions that pay for it run in the channels-blocked layout."""
    opset = graph.opsets.get("")
    if opset is None or opset < 5:   # (Reshape's shape is an input from opset 5)
        return
    inputs = {n: _conv_input(n) for n in graph.nodes}
    nchw_input = {n for n, kind in inputs.items() if kind == "nchw"}
    candidates = [n for n in graph.nodes if inputs[n] is not None or _poolable(n)]
    if not candidates:
        return
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    chosen: set[Node] = set()
    for chain in _chains(candidates, nchw_input):
        members = set(chain)
        made = {n.outputs[0] for n in chain}
        entering = {v for n in chain for i, v in enumerate(n.inputs[:4])
                    if v is not None and i in (0, 3) and v not in made and not (i == 0 and n in nchw_input)}
        leaving = {v for v in made if v in outputs or any(c not in members for c in consumers.get(v, []))}
        moved = sum(int(np.prod(v.shape)) for v in entering | leaving)
        work = sum(macs(n) for n in chain if inputs[n] is not None)
        if work >= MIN_CHAIN_MACS and work >= MIN_MACS_PER_REORDERED * max(1, moved):
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
        yb = graph.new_value(y.name + "_blocked")
        if inputs[node] is None:   # a pool
            kernel = tuple(node.attrs["kernel_shape"])
            attrs = {"kernel_shape": kernel, "strides": tuple(node.attrs.get("strides", (1, 1))),
                     "pads": tuple(_pads(node, kernel)), "mode": "max" if node.op_type == "MaxPool" else "avg",
                     "count_include_pad": int(node.attrs.get("count_include_pad", 0))}
            made = Node("BlockedPool", "onnxc", node.name, [to_blocked(node.inputs[0])], [yb], attrs, opset=1,
                        impl=BlockedPool(), version=1)
        else:
            x = node.inputs[0] if node in nchw_input else to_blocked(node.inputs[0])
            conv_inputs = [x, node.inputs[1], node.input(2)]
            if node.input(3) is not None:
                conv_inputs.append(to_blocked(node.inputs[3]))
            kernel = node.inputs[1].const.shape[2:]
            attrs = {"kernel_shape": tuple(kernel), "strides": tuple(node.attrs.get("strides", (1, 1))),
                     "pads": tuple(_pads(node, kernel)), "activation": node.attrs.get("activation", ""),
                     "activation_params": tuple(node.attrs.get("activation_params", ()))}
            made = Node("BlockedConv", "onnxc", node.name, conv_inputs, [yb], attrs, opset=1, impl=BlockedConv(),
                        version=1, memo=dict(node.memo))
        yb.producer = made
        infer_node(graph, made)
        new_nodes.append(made)
        blocked[y] = yb
        if y in outputs or any(c not in chosen for c in consumers.get(y, [])):
            split = graph.new_value(y.name + "_nchw_split")
            make("Transpose", [yb], split, {"perm": list(FROM_BLOCKED)}, y.name + "/from_blocked")
            make("Reshape", [split, shape_const(y.name + "_nchw_shape", y.shape)], y, {},
                 y.name + "/from_blocked_reshape")
    graph.nodes = new_nodes

