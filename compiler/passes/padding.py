"""Convolutions whose taps read padding: taps that read only padding are dropped, and a
convolution whose outputs read padding with much of their kernel is split into regions of
output positions that each read the input only (their GEMMs skip the zeros)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value
from ..ops.registry import lookup
from .infer import infer_node


def _geometry(node: Node) -> Optional[tuple]:
    """(rank, input dims, output dims, kernel, strides, dilations, pads) of a Conv with constant
    weights, static spatial sizes and explicit pads; None for any other node."""
    if node.op_type != "Conv" or node.domain or node.attrs.get("auto_pad", "NOTSET") != "NOTSET":
        return None
    x, w, y = node.inputs[0], node.input(1), node.outputs[0]
    if w is None or w.const is None or x.shape is None or y.shape is None or len(x.shape) < 3 \
            or w.const.ndim != len(x.shape):
        return None
    rank = len(x.shape) - 2
    in_dims, out_dims, kernel = list(x.shape[2:]), list(y.shape[2:]), list(w.const.shape[2:])
    if not all(isinstance(d, int) and d > 0 for d in (*in_dims, *out_dims)):
        return None
    strides = list(node.attrs.get("strides", [1] * rank))
    dilations = list(node.attrs.get("dilations", [1] * rank))
    pads = list(node.attrs.get("pads", [0] * (2 * rank)))
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        return None
    return rank, in_dims, out_dims, kernel, strides, dilations, pads


def _valid_taps(o: int, size: int, k: int, s: int, d: int, begin: int) -> tuple[int, int]:
    """The first and last tap (of k, dilation d) that output position o (stride s) reads inside
    an axis of ``size`` values with ``begin`` of padding before it; (k, -1) when none."""
    taps = [t for t in range(k) if 0 <= o * s + t * d - begin < size]
    return (taps[0], taps[-1]) if taps else (k, -1)


def trim_padding_taps(graph: Graph) -> None:
    """Kernel taps of a Conv (constant weights, static sizes, explicit pads) that read only
    padding at every output position are dropped: the weights keep the taps some output reads,
    and the pads shrink by what was dropped, so the output is the same. A 3x3 convolution
    dilated by 36 over a 33x33 map (DeepLabV3's widest ASPP branch) is a 1x1 one: its other
    eight taps would multiply zeros."""
    for node in graph.nodes:
        geometry = _geometry(node)
        if geometry is None:
            continue
        x, w = node.inputs[0], node.inputs[1]
        rank, in_dims, out_dims, kernel, strides, dilations, pads = geometry
        keep, new_pads, new_dilations = [], list(pads), list(dilations)
        for a in range(rank):
            d, begin = dilations[a], pads[a]
            # the taps some output position reads inside the input
            spans = [_valid_taps(o, in_dims[a], kernel[a], strides[a], d, begin) for o in range(out_dims[a])]
            first, last = min(f for f, _ in spans), max(t for _, t in spans)
            if last < first:
                break
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


# A convolution is split into regions where that leaves at most this share of its cost (the
# rest multiplies padding), it has at least this many multiply-adds, and at most this many
# regions: each region's input is copied out (a Slice) and its output joined (Concat). The cost
# counts, besides the products, each region's read of the weights of its taps (a GEMM streams
# them from memory: REGION_WEIGHT_COST multiply-adds a weight, as the GEMM's split weighs them):
# a 3x3 kernel with pads of 1 on a 4x4 map would leave 69% of the products in 9 regions that
# read the weights 5.4 times over (512 channels: 2.86 ms split, 0.55 whole, at 1 thread, Sapphire Rapids).
REGION_WORK_SHARE = 0.75
REGION_WEIGHT_COST = 16
REGION_MIN_MACS = 1 << 24
REGION_MAX = 16


def split_padding_regions(graph: Graph) -> None:
    """A 2-D Conv (constant weights, static sizes, explicit pads) whose output positions read
    padding with much of their kernel (a 3x3 kernel dilated by 12 or 24 over a 33x33 map, as in
    DeepLabV3's ASPP: rows near an edge read two of the three kernel rows, or one) is split into
    rectangles of output positions that read the same taps, all of them inside the input: each
    is a Conv without padding of a slice of the input by those taps' weights, and the rectangles
    are joined by Concat. The products by padding that im2col's GEMM would compute (43% and 73%
    of them in those two branches) are skipped; every output adds the same nonzero products in
    the same order (grouped into the GEMM's blocks differently, so the last bits may differ).
    Convolutions of a few padded border rows (a 3x3 kernel with pads of 1) are left alone: they
    read padding with under 25% of their products, and so are maps so small that the regions'
    reads of the weights would cost more than the products by padding they skip."""
    nodes: list[Node] = []
    for node in graph.nodes:
        regions = _regions(node)
        nodes.extend([node] if regions is None else _split(graph, node, *regions))
    graph.nodes = nodes


def _regions(node: Node) -> Optional[tuple[list, list]]:
    """Per axis (height, width) the bands of output positions that read the same taps: (first
    output, end, first tap, last tap); None where the Conv is not worth splitting."""
    geometry = _geometry(node)
    if geometry is None or geometry[0] != 2 or len(node.inputs[0].shape) != 4 or node.opset < 10:
        return None   # (Slice takes its starts and ends as inputs from opset 10)
    rank, in_dims, out_dims, kernel, strides, dilations, pads = geometry
    x, w = node.inputs[0], node.inputs[1]
    if not isinstance(x.shape[1], int) or node.outputs[0].dtype != x.dtype:
        return None
    # (per image: the batch may be symbolic)
    macs = int(np.prod(node.outputs[0].shape[1:], dtype=np.int64)) * int(np.prod(w.const.shape[1:], dtype=np.int64))
    if macs < REGION_MIN_MACS:
        return None
    axes = []
    work = full = taps_read = 1
    for a in range(2):
        bands: list[list[int]] = []
        for o in range(out_dims[a]):
            first, last = _valid_taps(o, in_dims[a], kernel[a], strides[a], dilations[a], pads[a])
            if last < first:
                return None          # an output that reads no input at all: not split
            if bands and bands[-1][2:] == [first, last]:
                bands[-1][1] = o + 1
            else:
                bands.append([o, o + 1, first, last])
        axes.append(bands)
        work *= sum((end - start) * (last - first + 1) for start, end, first, last in bands)
        full *= out_dims[a] * kernel[a]
        taps_read *= sum(last - first + 1 for _, _, first, last in bands)   # (over every region)
    # (per input and output channel pair)
    split_cost = work + REGION_WEIGHT_COST * taps_read
    whole_cost = full + REGION_WEIGHT_COST * kernel[0] * kernel[1]
    if split_cost > REGION_WORK_SHARE * whole_cost or len(axes[0]) * len(axes[1]) > REGION_MAX:
        return None
    return axes[0], axes[1]


def _split(graph: Graph, conv: Node, rows: list, cols: list) -> list[Node]:
    """The nodes computing ``conv`` by the rectangles of ``rows`` x ``cols`` (see _regions)."""
    x, w, y = conv.inputs[0], conv.inputs[1], conv.outputs[0]
    _, _, _, _, strides, dilations, pads = _geometry(conv)
    opset = graph.opsets.get("", conv.opset)
    nodes: list[Node] = []

    def node(op_type: str, inputs: list[Optional[Value]], output: Value, attrs: dict) -> Value:
        made = Node(op_type, "", f"{conv.name}/{op_type}{len(nodes)}", inputs, [output], attrs, opset=opset,
                    impl=lookup("", op_type, opset), version=onnx.defs.get_schema(op_type, opset).since_version)
        output.producer = made
        nodes.append(made)
        infer_node(graph, made)
        return output

    def const(name: str, array: np.ndarray) -> Value:
        return graph.new_value(f"{conv.name}_{name}", dt.from_numpy(array.dtype), tuple(array.shape), array)

    n, m = y.shape[:2]
    band_outputs = []
    for r0, r1, rf, rl in rows:
        pieces = []
        for c0, c1, cf, cl in cols:
            # the input this rectangle reads, and the taps it reads it with
            begin = [r0 * strides[0] + rf * dilations[0] - pads[0], c0 * strides[1] + cf * dilations[1] - pads[1]]
            end = [(r1 - 1) * strides[0] + rl * dilations[0] - pads[0] + 1,
                   (c1 - 1) * strides[1] + cl * dilations[1] - pads[1] + 1]
            if begin == [0, 0] and end == list(x.shape[2:]):
                part = x   # (a rectangle that reads all of X: no copy)
            else:
                part = node("Slice", [x, const("starts", np.array(begin, np.int64)),
                                      const("ends", np.array(end, np.int64)), const("axes", np.array([2, 3], np.int64))],
                            graph.new_value(f"{x.name}_r{r0}c{c0}", x.dtype, (*x.shape[:2], end[0] - begin[0],
                                                                              end[1] - begin[1])), {})
            taps = np.ascontiguousarray(w.const[:, :, rf:rl + 1, cf:cl + 1])
            attrs = {**conv.attrs, "pads": [0, 0, 0, 0], "kernel_shape": list(taps.shape[2:]),
                     "dilations": [dilations[0] if rl > rf else 1, dilations[1] if cl > cf else 1]}
            pieces.append(node("Conv", [part, const("taps", taps), *conv.inputs[2:]],
                               graph.new_value(f"{y.name}_r{r0}c{c0}", y.dtype, (n, m, r1 - r0, c1 - c0)), attrs))
        band = pieces[0] if len(pieces) == 1 else \
            node("Concat", pieces, graph.new_value(f"{y.name}_r{r0}", y.dtype, (n, m, r1 - r0, y.shape[3])), {"axis": 3})
        band_outputs.append(band)
    if len(band_outputs) == 1:
        # (one band of rows: its last node computes y itself)
        nodes[-1].outputs = [y]
        y.producer = nodes[-1]
        infer_node(graph, nodes[-1])
    else:
        node("Concat", band_outputs, y, {"axis": 2})
    return nodes
