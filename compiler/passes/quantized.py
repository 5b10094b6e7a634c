"""fuse_qdq (EXTENDED): a model in the QDQ format (each float op between DequantizeLinear of
its inputs and QuantizeLinear of its output) becomes the quantized ops that format stands for,
as onnxruntime's QDQ transformers rewrite it, so int8 weights stay int8 and the arithmetic is
integer:

    DQ(x), DQ(w)[, DQ(int32 bias)] -> Conv [-> Relu] -> Q      QLinearConv [-> Max(y, zero point)]
    DQ(a), DQ(b) -> MatMul -> Q                                QLinearMatMul
    DQ(a), DQ(B)[, DQ(int32 C)] -> Gemm -> Q                   com.microsoft QGemm
    DQ(x) -> MaxPool / Reshape / Flatten / Transpose / ... -> Q  the op on the int8 values,
                                                                 where Q has DQ's scale and zero point

It runs before constant folding (which would turn DQ of a constant into float weights).
Scales and zero points must be constants, per tensor except the weights' (per output channel);
a bias must be int32 at scale x_scale * w_scale, which quantizers write. Anything else stays
as it is and computes in float.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value
from ..ops.registry import lookup
from .infer import infer_node

INT8S = (dt.INT8, dt.UINT8)
MS = "com.microsoft"
# Ops that only move, select or compare values: on int8 data with Q's scale and zero point
# equal to DQ's they give the same values as in float.
SAME_SCALE_OPS = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity",
                  "DepthToSpace", "SpaceToDepth")


@dataclass
class Quant:
    """A constant scale and zero point of a DequantizeLinear or QuantizeLinear node."""
    node: Node
    data: Value          # DQ: the quantized input; Q: the quantized output
    scale: Value
    zero: Value
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale.const.size == 1

    def same(self, other: "Quant") -> bool:
        return self.per_tensor and other.per_tensor and self.data.dtype is other.data.dtype \
            and np.array_equal(self.scale.const.reshape(-1), other.scale.const.reshape(-1)) \
            and np.array_equal(self.zero.const.reshape(-1), other.zero.const.reshape(-1))


def fuse_qdq(graph: Graph) -> None:
    opset = graph.opsets.get("", 0)
    if opset < 10:
        return
    consumers = graph.consumers()
    outputs = set(graph.outputs)

    def sole_reader(v: Value) -> Optional[Node]:
        readers = consumers.get(v, [])
        return readers[0] if len(readers) == 1 and v not in outputs and v.const is None else None

    new_nodes: dict[Node, list[Node]] = {}    # Q node -> the nodes that take its place
    dead: set[Node] = set()
    for q_node in graph.nodes:
        q = _quantize(graph, q_node)
        if q is None or q_node in dead:
            continue
        core = q_node.inputs[0].producer
        relu = None
        if core is not None and core.op_type == "Relu" and not core.domain and sole_reader(core.outputs[0]) is q_node:
            relu, core = core, core.inputs[0].producer
            if core is None or sole_reader(core.outputs[0]) is not relu:
                continue
        elif core is None or sole_reader(core.outputs[0]) is not q_node:
            continue
        if core.domain or core in dead or core.outputs[0].dtype is not dt.FLOAT:
            continue
        if relu is None and core.op_type in SAME_SCALE_OPS:
            made = _same_scale(graph, core, q)
        elif core.op_type == "Conv":
            made = _conv(graph, core, relu, q)
        elif core.op_type == "MatMul" and relu is None:
            made = _matmul(graph, core, q)
        elif core.op_type == "Gemm" and relu is None:
            made = _gemm(graph, core, q)
        else:
            made = None
        if made is None:
            continue
        new_nodes[q_node] = made
        dead.update(n for n in (core, relu, q_node) if n is not None)
    if not new_nodes:
        return
    nodes: list[Node] = []
    for n in graph.nodes:
        if n in new_nodes:
            nodes.extend(new_nodes[n])
        elif n not in dead:
            nodes.append(n)
    graph.nodes = nodes
    for made in new_nodes.values():
        for n in made:
            infer_node(graph, n)


def _const(v: Optional[Value]) -> Optional[np.ndarray]:
    return None if v is None else v.const


def _zero(graph: Graph, scale: Value, zero: Optional[Value], dtype: dt.DType) -> Optional[Value]:
    """The zero point as a constant Value (0 of ``dtype`` when omitted), or None if not constant."""
    if zero is None:
        z = np.zeros(scale.const.shape, dtype.np)
        return graph.new_value(scale.name + "_zero_point", dtype, tuple(z.shape), z)
    return zero if zero.const is not None else None


def _dequantize(graph: Graph, v: Optional[Value], types=INT8S) -> Optional[Quant]:
    """``v`` as the output of a plain DequantizeLinear of a ``types`` tensor with constant float32
    scale and zero point (per tensor or per axis), else None."""
    node = v.producer if v is not None else None
    if node is None or node.op_type != "DequantizeLinear" or node.domain or node.outputs[0].dtype is not dt.FLOAT:
        return None
    x, scale, zero = node.inputs[0], node.input(1), node.input(2)
    if x.dtype not in types or scale is None or scale.dtype is not dt.FLOAT or _const(scale) is None \
            or scale.const.ndim > 1 or node.attrs.get("block_size", 0):
        return None
    zero = _zero(graph, scale, zero, x.dtype)
    if zero is None or zero.dtype is not x.dtype or zero.const.size != scale.const.size:
        return None
    axis = node.attrs.get("axis", 1)
    if x.shape is not None and x.shape:
        axis %= len(x.shape)
    return Quant(node, x, scale, zero, axis)


def _quantize(graph: Graph, node: Node) -> Optional[Quant]:
    """A QuantizeLinear of float32 to int8 / uint8 with a constant scalar scale and zero point."""
    if node.op_type != "QuantizeLinear" or node.domain or node.inputs[0].dtype is not dt.FLOAT:
        return None
    y = node.outputs[0]
    scale, zero = node.input(1), node.input(2)
    if y.dtype not in INT8S or scale is None or scale.dtype is not dt.FLOAT or _const(scale) is None \
            or scale.const.size != 1 or node.attrs.get("block_size", 0):
        return None
    zero = _zero(graph, scale, zero, y.dtype)
    if zero is None or zero.dtype is not y.dtype or zero.const.size != 1:
        return None
    return Quant(node, y, scale, zero, 0)


def _node(graph: Graph, op_type: str, domain: str, name: str, inputs: list, outputs: list[Value],
          attrs: dict) -> Node:
    opset = graph.opsets.get(domain, 1)
    version = onnx.defs.get_schema(op_type, opset).since_version if not domain else 1
    node = Node(op_type, domain, name, inputs, outputs, attrs, opset=opset, impl=lookup(domain, op_type, opset),
                version=version)
    for out in outputs:
        out.producer = node
    return node


def _int32_bias(graph: Graph, b: Optional[Value], x: Quant, w: Quant, channels: int) -> tuple[bool, Optional[Value]]:
    """(fusable, bias): an omitted bias, or DequantizeLinear of an int32 constant with zero point
    0 and scale x_scale * w_scale (to float32 rounding) per output channel."""
    if b is None:
        return True, None
    bq = _dequantize(graph, b, (dt.INT32,))
    if bq is None or bq.data.const is None or bq.data.const.size != channels or np.any(bq.zero.const != 0):
        return False, None
    want = (x.scale.const.astype(np.float32).reshape(-1) * w.scale.const.astype(np.float32).reshape(-1)).astype(np.float32)
    have = bq.scale.const.astype(np.float32).reshape(-1)
    if not np.allclose(have, np.broadcast_to(want, have.shape), rtol=1e-6, atol=0):
        return False, None
    data = bq.data
    if len(data.shape) != 1:
        data = graph.new_value(data.name + "_vector", dt.INT32, (channels,), data.const.reshape(-1))
    return True, data


def _conv(graph: Graph, conv: Node, relu: Optional[Node], q: Quant) -> Optional[list[Node]]:
    x = _dequantize(graph, conv.inputs[0])
    w = _dequantize(graph, conv.inputs[1])
    if x is None or w is None or not x.per_tensor or w.data.const is None:
        return None
    m = w.data.shape[0]
    if not w.per_tensor and (w.axis != 0 or w.scale.const.size != m):
        return None
    ok, bias = _int32_bias(graph, conv.input(2), x, w, m)
    if not ok:
        return None
    if relu is not None and graph.opsets.get("", 0) < 12:
        return None    # Max of int8 values needs opset 12
    y = q.data
    attrs = {k: v for k, v in conv.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape",
                                                              "pads", "strides")}
    inputs = [x.data, x.scale, x.zero, w.data, w.scale, w.zero, q.scale, q.zero] + ([bias] if bias is not None else [])
    lo = -128 if y.dtype is dt.INT8 else 0
    if relu is None or int(q.zero.const.reshape(-1)[0]) == lo:
        # (a ReLU before quantizing to a zero point at the type's minimum is the saturation)
        return [_node(graph, "QLinearConv", "", conv.name, inputs, [y], attrs)]
    pre = graph.new_value(y.name + "_before_relu", y.dtype, y.shape)
    floor = graph.new_value(q.zero.name + "_relu", y.dtype, (), q.zero.const.reshape(()).copy())
    return [_node(graph, "QLinearConv", "", conv.name, inputs, [pre], attrs),
            _node(graph, "Max", "", relu.name, [pre, floor], [y], {})]


def _matmul(graph: Graph, mm: Node, q: Quant) -> Optional[list[Node]]:
    a = _dequantize(graph, mm.inputs[0])
    b = _dequantize(graph, mm.inputs[1])
    if a is None or b is None or not a.per_tensor or not b.per_tensor:
        return None
    inputs = [a.data, a.scale, a.zero, b.data, b.scale, b.zero, q.scale, q.zero]
    return [_node(graph, "QLinearMatMul", "", mm.name, inputs, [q.data], {})]


def _gemm(graph: Graph, gemm: Node, q: Quant) -> Optional[list[Node]]:
    a = _dequantize(graph, gemm.inputs[0])
    b = _dequantize(graph, gemm.inputs[1])
    trans_b = gemm.attrs.get("transB", 0)
    if a is None or b is None or not a.per_tensor or b.data.const is None or b.data.shape is None \
            or len(b.data.shape) != 2:
        return None
    n = b.data.shape[0] if trans_b else b.data.shape[1]
    if not b.per_tensor and (b.axis != (0 if trans_b else 1) or b.scale.const.size != n):
        return None
    if gemm.input(2) is not None and gemm.attrs.get("beta", 1.0) != 1.0:
        return None
    ok, bias = _int32_bias(graph, gemm.input(2), a, b, n)
    if not ok:
        return None
    graph.opsets.setdefault(MS, 1)
    b_scale, b_zero = b.scale, b.zero
    if b.per_tensor and b.scale.const.ndim != 0:
        b_scale = graph.new_value(b.scale.name + "_scalar", dt.FLOAT, (), b.scale.const.reshape(()))
        b_zero = graph.new_value(b.zero.name + "_scalar", b.zero.dtype, (), b.zero.const.reshape(()))
    attrs = {"alpha": float(gemm.attrs.get("alpha", 1.0)), "transA": int(gemm.attrs.get("transA", 0)),
             "transB": int(trans_b)}
    inputs = [a.data, a.scale, a.zero, b.data, b_scale, b_zero, bias, q.scale, q.zero]
    return [_node(graph, "QGemm", MS, gemm.name, inputs, [q.data], attrs)]


def _same_scale(graph: Graph, op: Node, q: Quant) -> Optional[list[Node]]:
    x = _dequantize(graph, op.inputs[0])
    if x is None or not x.same(q) or len(op.outputs) != 1:
        return None
    op.inputs = [x.data] + list(op.inputs[1:])
    op.outputs = [q.data]
    q.data.producer = op
    return [op]
