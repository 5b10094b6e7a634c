"""Passes that merge nodes into fewer, larger kernels.

fold_batch_norm (BASIC): an inference BatchNormalization after a Conv becomes part of the
Conv's weights and bias; scale_shift_batch_norm (BASIC) turns the others into Mul and Add;
fold_conv_scale_shift (BASIC) folds a per-channel constant Mul or Add after a Conv into it. fuse_conv_epilogue (EXTENDED): a float32 Conv followed by a
residual Add and/or an activation becomes one FusedConv, whose GEMM applies them to each
output tile while it is in cache. fuse_matmul_epilogue (EXTENDED) does the same for a float32
MatMul by a matrix followed by a bias Add, a residual Add and/or an activation.
fuse_attention (EXTENDED): a float32 MatMul -> [Mul / Div by a constant] -> [Add of a mask] ->
Softmax -> MatMul (an attention written out) becomes one FusedAttention, which never stores
the whole matrix of scores.
fuse_elementwise (EXTENDED): trees of float32 elementwise
ops whose intermediate results have one reader each become one FusedElementwise loop.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from .. import dtypes as dt
from ..ir import Graph, Node, Value
from ..ops import _fused
from ..ops import fused_elementwise
from ..ops.fused_attention import FusedAttention, mask_strides
from ..ops.fused_conv import FusedConv
from ..ops.fused_elementwise import FusedElementwise
from ..ops.fused_mat_mul import FusedMatMul
from ..ops.registry import lookup


def _described(nodes: list[Node]) -> str:
    """The nodes a fused node replaces, as the generated code's comment names them."""
    return " -> ".join(f"{n.op_type} '{n.name}'" for n in nodes)


def _sole_reader(v: Value, consumers: dict[Value, list[Node]], outputs: set[Value]) -> Optional[Node]:
    """The one node that reads ``v``, if ``v`` has exactly one reader and is no graph output."""
    readers = consumers.get(v, [])
    if len(readers) != 1 or v in outputs or v.const is not None:
        return None
    return readers[0]


def _conv_bias(conv: Node, m: int) -> np.ndarray:
    """The Conv's constant bias in float64 (zeros where it has none)."""
    bias = conv.input(2)
    return np.zeros(m) if bias is None else np.asarray(bias.const, np.float64).reshape(-1)


def _set_conv_weights(graph: Graph, conv: Node, factor: Optional[np.ndarray], bias: np.ndarray, suffix: str) -> None:
    """The Conv's constant weights scaled by ``factor`` per output channel (None: kept) and its
    bias set to ``bias`` (float64), as new constants of its weights' type named with ``suffix``."""
    w_in, b_in = conv.inputs[1], conv.input(2)
    w = w_in.const
    if factor is not None:
        scaled = w.astype(np.float64) * factor.reshape((w.shape[0],) + (1,) * (w.ndim - 1))
        w_in = graph.new_value(w_in.name + suffix, w_in.dtype, tuple(w.shape), scaled.astype(w.dtype))
    b_value = graph.new_value((b_in.name if b_in is not None else conv.outputs[0].name) + "_bias" + suffix,
                              w_in.dtype, (w.shape[0],), bias.astype(w.dtype))
    conv.inputs = [conv.inputs[0], w_in, b_value]


def fold_batch_norm(graph: Graph) -> None:
    """Conv -> BatchNormalization (inference mode, constant parameters): the Conv's weights
    scaled by gamma / sqrt(var + eps) per output channel, its bias (b - mean) * that + beta."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    dead: set[Node] = set()
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain or len(bn.outputs) != 1:
            continue
        if bn.attrs.get("training_mode", 0) or bn.attrs.get("spatial", 1) != 1:
            continue
        conv = bn.inputs[0].producer
        if conv is None or conv.op_type != "Conv" or conv.domain or conv in dead:
            continue
        if _sole_reader(conv.outputs[0], consumers, outputs) is not bn:
            continue
        w = conv.inputs[1].const if conv.inputs[1] is not None else None
        params = [v.const if v is not None else None for v in bn.inputs[1:5]]
        bias = conv.input(2)
        if w is None or any(p is None for p in params) or (bias is not None and bias.const is None):
            continue
        if conv.outputs[0].dtype not in (dt.FLOAT, dt.DOUBLE):
            continue
        scale, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
        m = w.shape[0]
        if any(p.size != m for p in (scale, beta, mean, var)):
            continue
        factor = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        _set_conv_weights(graph, conv, factor, (_conv_bias(conv, m) - mean) * factor + beta, "_bn")
        graph.replace_uses(bn.outputs[0], conv.outputs[0])
        dead.add(bn)
    graph.remove_nodes(dead)


def _per_channel(v: Optional[Value], y: Value, m: int) -> Optional[np.ndarray]:
    """The constant ``v`` as m per-output-channel values (float64), where broadcasting it
    against the Conv output ``y`` multiplies or adds the same value over each channel's map
    (shape [m, 1, ...], [1, m, 1, ...], [1] or a scalar) and leaves ``y``'s shape as it is."""
    if v is None or v.const is None or y.shape is None or len(y.shape) < 2:
        return None
    shape = tuple(v.const.shape)
    if len(shape) > len(y.shape):
        return None
    channel = len(shape) - (len(y.shape) - 1)   # the position of y's axis 1 in v's shape
    for axis, d in enumerate(shape):
        if d != 1 and not (axis == channel and d == m):
            return None
    values = np.asarray(v.const, np.float64).reshape(-1)
    return np.broadcast_to(values, (m,)).copy() if values.size in (1, m) else None


def fold_conv_scale_shift(graph: Graph) -> None:
    """Conv -> Mul by a constant per output channel (or one constant) and Conv -> Add of one:
    the Conv's weights and bias scaled, its bias shifted (a BatchNormalization written as Mul
    and Add, as Caffe2's exports of Inception-v2 and DenseNet-121 have it), so that the
    activation after them fuses into the Conv's epilogue and the output is written once."""
    changed = True
    while changed:
        changed = False
        consumers = graph.consumers()
        outputs = set(graph.outputs)
        dead: set[Node] = set()
        for conv in graph.nodes:
            if conv.op_type != "Conv" or conv.domain or conv in dead or len(conv.outputs) != 1:
                continue
            y = conv.outputs[0]
            op = _sole_reader(y, consumers, outputs)
            if op is None or op.op_type not in ("Mul", "Add") or op.domain or len(op.inputs) != 2 \
                    or op in dead or op.outputs[0] in outputs or op.outputs[0].shape != y.shape \
                    or op.outputs[0].dtype is not y.dtype:
                continue   # (a graph output keeps its name)
            w, bias = conv.inputs[1], conv.input(2)
            if w is None or w.const is None or (bias is not None and bias.const is None) \
                    or y.dtype not in (dt.FLOAT, dt.DOUBLE):
                continue
            m = int(w.const.shape[0])
            other = op.inputs[1] if op.inputs[0] is y else op.inputs[0]
            values = _per_channel(other, y, m)
            if values is None or not np.all(np.isfinite(values)):
                continue
            b = _conv_bias(conv, m)
            if op.op_type == "Mul":
                _set_conv_weights(graph, conv, values, b * values, "_mul")
            else:
                _set_conv_weights(graph, conv, None, b + values, "_add")
            graph.replace_uses(op.outputs[0], y)
            dead.add(op)
            changed = True
        graph.remove_nodes(dead)


def scale_shift_batch_norm(graph: Graph) -> None:
    """A float inference BatchNormalization with constant parameters that no Conv took
    (DenseNet's BN -> ReLU -> Conv, after a Concat) becomes Mul by gamma / sqrt(var + eps)
    and Add of beta - mean * that, per channel, as onnxruntime computes it: standard ops
    that fuse_elementwise joins with the activation into one loop."""
    nodes: list[Node] = []
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain:
            nodes.append(bn)
            continue
        x = bn.inputs[0]
        params = [v.const if v is not None else None for v in bn.inputs[1:5]]
        if len(bn.outputs) != 1 or len(params) != 4 \
                or bn.attrs.get("training_mode", 0) or bn.attrs.get("spatial", 1) != 1 \
                or any(p is None for p in params) or x.dtype not in (dt.FLOAT, dt.DOUBLE) \
                or x.shape is None or len(x.shape) < 2 or not isinstance(x.shape[1], int):
            nodes.append(bn)
            continue
        scale, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
        c = x.shape[1]
        if any(p.size != c for p in (scale, beta, mean, var)):
            nodes.append(bn)
            continue
        factor = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        shape = (c,) + (1,) * (len(x.shape) - 2)
        np_type = x.dtype.np
        factor_value = graph.new_value(bn.name + "_scale", x.dtype, shape, factor.astype(np_type).reshape(shape))
        shift_value = graph.new_value(bn.name + "_shift", x.dtype, shape,
                                      (beta - mean * factor).astype(np_type).reshape(shape))
        scaled = graph.new_value(bn.outputs[0].name + "_scaled", x.dtype, x.shape)
        opset = graph.opsets.get("", bn.opset)
        for op_type, inputs, out in (("Mul", [x, factor_value], scaled), ("Add", [scaled, shift_value], bn.outputs[0])):
            node = Node(op_type, "", bn.name, inputs, [out], {}, opset=opset, impl=lookup("", op_type, opset),
                        version=onnx.defs.get_schema(op_type, opset).since_version)
            out.producer = node
            nodes.append(node)
    graph.nodes = nodes


def fuse_conv_epilogue(graph: Graph) -> None:
    """Conv -> [Add (or two-input Sum) of a same-shape tensor] -> [activation], on float32:
    one FusedConv."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    replaced: dict[Node, Node] = {}   # last node of a pattern -> its FusedConv
    dead: set[Node] = set()
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.domain or conv.outputs[0].dtype is not dt.FLOAT or conv in dead:
            continue
        y = conv.outputs[0]
        pattern, residual = [conv], None
        add = _sole_reader(y, consumers, outputs)
        # (Sum of two tensors is Add: the light zoo's ResNet-50 writes its residuals that way)
        if add is not None and add.op_type in ("Add", "Sum") and not add.domain and len(add.inputs) == 2:
            other = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
            if other is not y and other.dtype is dt.FLOAT and other.shape == y.shape \
                    and add.outputs[0].shape == y.shape:
                pattern.append(add)
                residual = other
        activation = _activation(graph, pattern[-1].outputs[0], consumers, outputs)
        if activation is not None:
            pattern += activation[2]
        if len(pattern) == 1 or any(n in dead for n in pattern):
            continue
        attrs = dict(conv.attrs)
        attrs["activation"], attrs["activation_params"] = activation[:2] if activation else ("", ())
        inputs = (list(conv.inputs) + [None, None])[:3]
        last = pattern[-1]
        fused = Node("FusedConv", _fused.DOMAIN, conv.name, inputs + [residual], [last.outputs[0]], attrs,
                     opset=1, impl=FusedConv(), version=1, memo={"fused": _described(pattern)})
        last.outputs[0].producer = fused
        replaced[last] = fused
        dead.update(pattern)
    graph.nodes = [replaced.get(n, n) for n in graph.nodes if n not in dead or n in replaced]


def fuse_conv_prologue(graph: Graph) -> None:
    """[Mul by | Add of a constant per channel]... -> Relu -> a float32 1x1 Conv (or FusedConv)
    of one group, stride 1, no padding, constant weights, each step's result read only by the
    next: the Conv reads the first step's input and applies X * S + T and the ReLU itself, as
    its GEMM packs X (a FusedConv with a prologue), so the activated tensor is never stored.
    DenseNet's BatchNormalization and ReLU before each 1x1 convolution run over the Concat of
    every earlier layer's output: a pass over a growing tensor written and read again per layer."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    replaced: dict[Node, Node] = {}
    dead: set[Node] = set()
    for conv in graph.nodes:
        if (conv.op_type, conv.domain) not in (("Conv", ""), ("FusedConv", _fused.DOMAIN)) or conv in dead \
                or conv.input(4) is not None or not _pointwise_conv(conv):
            continue
        x = conv.inputs[0]
        relu = x.producer
        if relu is None or relu.op_type != "Relu" or relu.domain or relu in dead \
                or _sole_reader(x, consumers, outputs) is not conv:
            continue
        c = x.shape[1]
        scale, shift = np.ones(c), np.zeros(c)
        chain, v = [relu], relu.inputs[0]
        # back from the Relu through Mul and Add of per-channel constants (composed in float64:
        # the Relu reads scale * v + shift of the step's output v = src * a, or src + a)
        while True:
            op = v.producer
            if op is None or op.op_type not in ("Mul", "Add") or op.domain or op in dead or len(op.inputs) != 2 \
                    or _sole_reader(v, consumers, outputs) is not chain[-1]:
                break
            src, const = (op.inputs[0], op.inputs[1]) if op.inputs[1].const is not None else (op.inputs[1], op.inputs[0])
            values = _per_channel(const, v, c)
            if src.const is not None or values is None or not np.all(np.isfinite(values)) \
                    or src.dtype is not dt.FLOAT or tuple(src.shape or ()) != tuple(x.shape):
                break
            if op.op_type == "Mul":
                scale = scale * values
            else:
                shift = shift + scale * values
            chain.append(op)
            v = src
        if tuple(v.shape or ()) != tuple(x.shape) or v.dtype is not dt.FLOAT:
            continue
        s_value = graph.new_value(conv.name + "_prologue_scale", dt.FLOAT, (c, 1, 1),
                                  scale.astype(np.float32).reshape(c, 1, 1))
        t_value = graph.new_value(conv.name + "_prologue_shift", dt.FLOAT, (c, 1, 1),
                                  shift.astype(np.float32).reshape(c, 1, 1))
        attrs = dict(conv.attrs)
        attrs.setdefault("activation", "")
        attrs.setdefault("activation_params", ())
        attrs["prologue"] = "Relu"
        inputs = (list(conv.inputs) + [None, None, None])[:4]
        inputs[0] = v
        memo = dict(conv.memo) if conv.op_type == "FusedConv" else {"fused": _described([conv])}
        memo["fused"] = _described(list(reversed(chain))) + " -> " + memo["fused"]
        fused = Node("FusedConv", _fused.DOMAIN, conv.name, inputs + [s_value, t_value], list(conv.outputs), attrs,
                     opset=1, impl=FusedConv(), version=1, memo=memo)
        for out in conv.outputs:
            out.producer = fused
        replaced[conv] = fused
        dead.update(chain)
    graph.nodes = [replaced.get(n, n) for n in graph.nodes if n not in dead]


def _pointwise_conv(conv: Node) -> bool:
    """A float32 2-D Conv whose GEMM reads X as it is: 1x1, one group, stride 1, no padding
    (any auto_pad pads a 1x1 kernel of stride 1 by nothing), constant weights (and bias),
    static channels."""
    x, w, y = conv.inputs[0], conv.input(1), conv.outputs[0]
    b = conv.input(2)
    if x.dtype is not dt.FLOAT or y.dtype is not dt.FLOAT or x.shape is None or len(x.shape) != 4 \
            or not isinstance(x.shape[1], int) or w is None or w.const is None or w.const.ndim != 4 \
            or (b is not None and b.const is None):
        return False
    a = conv.attrs
    return tuple(w.const.shape[2:]) == (1, 1) and a.get("group", 1) == 1 \
        and all(v == 1 for v in a.get("strides", (1, 1))) and all(v == 0 for v in a.get("pads", (0, 0, 0, 0)))


def fuse_attention(graph: Graph) -> None:
    """MatMul(Q, K) -> [Mul or Div by a constant scalar] -> [Add of a mask that broadcasts to the
    scores] -> Softmax over the last axis -> MatMul(., V), all float32, Q, K and V of one rank
    (>= 3, batch axes broadcast as MatMul's), each step's result read only by the next: one
    FusedAttention."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    replaced: dict[Node, Node] = {}
    dead: set[Node] = set()
    for mm in graph.nodes:
        if mm.op_type != "MatMul" or mm.domain or mm in dead or len(mm.inputs) != 2:
            continue
        q, kt = mm.inputs
        scores = mm.outputs[0]
        if scores.dtype is not dt.FLOAT or q.shape is None or kt.shape is None or len(q.shape) < 3 \
                or len(kt.shape) != len(q.shape) or scores.shape is None or len(scores.shape) != len(q.shape):
            continue
        pattern: list[Node] = [mm]
        scale_op, scale, mask = "", 1.0, None
        node = _sole_reader(scores, consumers, outputs)
        cur = scores
        if node is not None and node.op_type in ("Mul", "Div") and not node.domain and len(node.inputs) == 2:
            other = node.inputs[1] if node.inputs[0] is cur else (node.inputs[0] if node.op_type == "Mul" else None)
            value = _float_scalar(other) if other is not None and other is not cur else None
            if value is not None and node.outputs[0].shape == scores.shape:
                scale_op, scale = node.op_type, value
                pattern.append(node)
                cur = node.outputs[0]
                node = _sole_reader(cur, consumers, outputs)
        if node is not None and node.op_type == "Add" and not node.domain and len(node.inputs) == 2 \
                and node.version > 6:
            other = node.inputs[1] if node.inputs[0] is cur else node.inputs[0]
            # (the sum's shape may be symbols of its own where the mask's dims are: the kernel
            # checks at run time that the mask broadcasts to the scores)
            if other is not cur and other.dtype is dt.FLOAT and other.shape is not None \
                    and mask_strides(tuple(other.shape), tuple(scores.shape)) is not None:
                mask = other
                pattern.append(node)
                cur = node.outputs[0]
                node = _sole_reader(cur, consumers, outputs)
        if node is None or node.op_type != "Softmax" or node.domain:
            continue
        rank = len(scores.shape)
        if node.attrs.get("axis", -1 if node.version >= 13 else 1) % rank != rank - 1:
            continue
        pattern.append(node)
        probs = node.outputs[0]
        nan_fill = None
        tail = _nan_filled(probs, consumers, outputs)
        if tail is not None:
            nan_fill, where = tail[0], tail[1]
            pattern += tail[1:]
            probs = where.outputs[0]
        mm2 = _sole_reader(probs, consumers, outputs)
        if mm2 is None or mm2.op_type != "MatMul" or mm2.domain or mm2.inputs[0] is not probs:
            continue
        v = mm2.inputs[1]
        if v is probs or v.dtype is not dt.FLOAT or v.shape is None or len(v.shape) != rank \
                or mm2.outputs[0].shape is None:
            continue
        pattern.append(mm2)
        if any(n in dead for n in pattern):
            continue
        attrs = {"scale_op": scale_op, "scale": scale}
        if nan_fill is not None:
            attrs["nan_fill"] = nan_fill
        fused = Node("FusedAttention", _fused.DOMAIN, mm.name, [q, kt, v, mask], [mm2.outputs[0]], attrs,
                     opset=1, impl=FusedAttention(), version=1, memo={"fused": _described(pattern)})
        mm2.outputs[0].producer = fused
        replaced[mm2] = fused
        dead.update(pattern)
    graph.nodes = [replaced.get(n, n) for n in graph.nodes if n not in dead or n in replaced]


def _nan_filled(p: Value, consumers: dict[Value, list[Node]], outputs: set[Value]) -> Optional[tuple]:
    """Where(IsNaN(p), c, p) with c a constant float scalar, p read by just these two (how
    exporters zero the probabilities of rows whose keys are all masked): (c, the Where, the
    IsNaN), else None."""
    readers = consumers.get(p, [])
    if p in outputs or len(readers) != 2:
        return None
    isnan = next((n for n in readers if n.op_type == "IsNaN" and not n.domain), None)
    where = next((n for n in readers if n.op_type == "Where" and not n.domain), None)
    if isnan is None or where is None or len(where.inputs) != 3 or where.inputs[2] is not p \
            or where.inputs[0] is not isnan.outputs[0] or _sole_reader(isnan.outputs[0], consumers, outputs) is not where:
        return None
    c = where.inputs[1]
    value = _float_scalar(c)
    if value is None or len(np.shape(c.const)) > 1:
        return None
    return value, where, isnan


def _float_scalar(v: Value) -> Optional[float]:
    """The value of a float32 constant of one element, else None."""
    if v.const is None or v.dtype is not dt.FLOAT or np.asarray(v.const).size != 1:
        return None
    return float(np.asarray(v.const, np.float32).reshape(-1)[0])


def fuse_matmul_epilogue(graph: Graph) -> None:
    """MatMul(A, B) (float32, A of rank >= 2, B a matrix) -> [Add of a bias vector over the
    last axis] -> [Add of a same-shape tensor] -> [activation], at least one of them: one
    FusedMatMul."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    replaced: dict[Node, Node] = {}
    dead: set[Node] = set()
    for mm in graph.nodes:
        if mm.op_type != "MatMul" or mm.domain or mm in dead:
            continue
        a, b = mm.inputs
        y = mm.outputs[0]
        if y.dtype is not dt.FLOAT or a.shape is None or len(a.shape) < 2 or b.shape is None or len(b.shape) != 2:
            continue
        pattern: list[Node] = [mm]
        bias = residual = None
        for _ in range(2):
            add = _sole_reader(pattern[-1].outputs[0], consumers, outputs)
            if add is None or add.op_type not in ("Add", "Sum") or add.domain or len(add.inputs) != 2 \
                    or add.version <= 6 or add.outputs[0].shape != y.shape:
                break
            cur = pattern[-1].outputs[0]
            other = add.inputs[1] if add.inputs[0] is cur else add.inputs[0]
            if other is cur or other.dtype is not dt.FLOAT or other.shape is None:
                break
            vector_like = len(other.shape) == 1 or (other.const is not None and len(other.shape) >= 1
                                                    and all(d == 1 for d in other.shape[:-1]))
            if bias is None and residual is None and vector_like and other.shape[-1] == y.shape[-1]:
                bias = other
            elif residual is None and tuple(other.shape) == tuple(y.shape):
                residual = other
            else:
                break
            pattern.append(add)
        activation = _activation(graph, pattern[-1].outputs[0], consumers, outputs)
        if activation is not None:
            pattern += activation[2]
        if len(pattern) == 1 or any(n in dead for n in pattern):
            continue
        if bias is not None and len(bias.shape) != 1:   # a constant (1, ..., N): the vector it holds
            bias = Value(f"{bias.name}_vector", dt.FLOAT, (bias.shape[-1],), const=bias.const.reshape(-1))
        last = pattern[-1]
        attrs = {"activation": activation[0] if activation else "",
                 "activation_params": activation[1] if activation else ()}
        fused = Node("FusedMatMul", _fused.DOMAIN, mm.name, [a, b, bias, residual], [last.outputs[0]], attrs,
                     opset=1, impl=FusedMatMul(), version=1, memo={"fused": _described(pattern)})
        last.outputs[0].producer = fused
        replaced[last] = fused
        dead.update(pattern)
    graph.nodes = [replaced.get(n, n) for n in graph.nodes if n not in dead or n in replaced]


def _activation(graph: Graph, v: Value, consumers: dict[Value, list[Node]],
                outputs: set[Value]) -> Optional[tuple[str, tuple[float, ...], list[Node]]]:
    """The activation applied to ``v`` by its only reader(s): name, params and its nodes."""
    readers = consumers.get(v, [])
    if v in outputs:
        return None
    if len(readers) == 1:
        node = readers[0]
        found = _fused.activation_of(node, lambda i: node.input(i).const if node.input(i) is not None else None)
        if found is None or node.inputs[0] is not v or node.outputs[0].dtype is not dt.FLOAT:
            return None
        return found[0], found[1], [node]
    if len(readers) == 2:
        swish = _swish(v, readers, consumers, outputs)
        return swish if swish is not None else _hard_swish(v, readers, consumers, outputs)
    return None


def _swish(v: Value, readers: list[Node], consumers: dict[Value, list[Node]],
           outputs: set[Value]) -> Optional[tuple[str, tuple[float, ...], list[Node]]]:
    """SiLU: Mul(v, Sigmoid(v))."""
    sigmoid = next((n for n in readers if n.op_type == "Sigmoid" and not n.domain), None)
    mul = next((n for n in readers if n.op_type == "Mul" and not n.domain), None)
    if sigmoid is None or mul is None or len(mul.inputs) != 2:
        return None
    s = sigmoid.outputs[0]
    if _sole_reader(s, consumers, outputs) is not mul or set(mul.inputs) != {v, s}:
        return None
    return "Swish", (), [sigmoid, mul]


def _hard_swish(v: Value, readers: list[Node], consumers: dict[Value, list[Node]],
                outputs: set[Value]) -> Optional[tuple[str, tuple[float, ...], list[Node]]]:
    """HardSwish written out, as exporters without the op do: v * HardSigmoid(v) (tf2onnx), or
    v * Clip(v + 3, 0, 6) / 6 (PaddlePaddle; the division by 6, or the multiplication by 1/6,
    before or after the product). The epilogue computes v * max(0, min(1, alpha v + beta))."""
    def standard(n: Optional[Node], *ops: str) -> bool:
        return n is not None and not n.domain and n.op_type in ops and n.outputs[0].dtype is dt.FLOAT

    def other(n: Node, x: Value) -> Optional[Value]:   # (the binary node's operand beside x)
        if len(n.inputs) != 2 or x not in n.inputs or n.inputs[0] is n.inputs[1]:
            return None
        return n.inputs[1] if n.inputs[0] is x else n.inputs[0]

    def next_of(n: Node) -> Optional[Node]:
        return _sole_reader(n.outputs[0], consumers, outputs)

    def sixth(n: Optional[Node], x: Value) -> bool:   # x / 6 or x * (1/6)
        if not standard(n, "Div", "Mul") or (n.op_type == "Div" and n.inputs[0] is not x):
            return False
        c = other(n, x)
        k = _float_scalar(c) if c is not None else None
        return k is not None and (k == 6.0 if n.op_type == "Div" else abs(k - 1 / 6) < 1e-7)

    mul = next((n for n in readers if standard(n, "Mul")), None)
    first = next((n for n in readers if n is not mul), None)
    if mul is None or first is None or other(mul, v) is None:
        return None
    if standard(first, "HardSigmoid") and first.inputs[0] is v and other(mul, v) is first.outputs[0] \
            and next_of(first) is mul and mul.outputs[0].shape == v.shape:
        return "HardSwish", (float(first.attrs.get("alpha", 0.2)), float(first.attrs.get("beta", 0.5))), [first, mul]
    three = other(first, v) if standard(first, "Add") else None
    if three is None or _float_scalar(three) != 3.0:
        return None
    clip = next_of(first)
    if not standard(clip, "Clip") or clip.inputs[0] is not first.outputs[0]:
        return None
    bounds = _fused.activation_of(clip, lambda i: clip.input(i).const if clip.input(i) is not None else None)
    if bounds is None or bounds[1] != (0.0, 6.0):
        return None
    nodes = [first, clip]
    after = next_of(clip)
    if after is not mul:   # (divided before the product)
        if not sixth(after, clip.outputs[0]) or next_of(after) is not mul:
            return None
        nodes.append(after)
        product = other(mul, v)
        if product is not after.outputs[0]:
            return None
        nodes.append(mul)
    else:
        if other(mul, v) is not clip.outputs[0]:
            return None
        nodes.append(mul)
        after = next_of(mul)
        if not sixth(after, mul.outputs[0]):
            return None
        nodes.append(after)
    if nodes[-1].outputs[0].shape != v.shape:
        return None
    return "HardSwish", (1 / 6, 0.5), nodes


def fuse_elementwise(graph: Graph) -> None:
    """Each tree of fusable elementwise nodes (fused_elementwise.fusable) joined by values read
    once, by one operand of one node, becomes one FusedElementwise at the tree's root."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    order = {n: i for i, n in enumerate(graph.nodes)}
    tree: dict[Node, list[Node]] = {}   # node -> its tree's members in graph order, the root last
    for n in graph.nodes:
        if not fused_elementwise.fusable(n):
            continue
        members = [n]
        for v in n.inputs:
            # a producer whose only output use is this operand: its tree (p is its root) joins
            p = v.producer
            if p is not None and p in tree and _sole_reader(v, consumers, outputs) is n \
                    and sum(u is v for u in n.inputs) == 1:
                members = tree[p] + members
        members.sort(key=lambda m: order[m])
        for m in members:
            tree[m] = members
    replaced: dict[Node, Node] = {}
    dead: set[Node] = set()
    for members in {t[-1]: t for t in tree.values()}.values():
        if len(members) < 2:
            continue
        root = members[-1]
        position = {m.outputs[0]: j for j, m in enumerate(members)}
        inputs: list[Value] = []
        steps = []
        for m in members:
            refs = []
            for v in m.inputs:
                if v in position:
                    refs.append(("step", position[v]))
                    continue
                if all(u is not v for u in inputs):
                    inputs.append(v)
                refs.append(("input", next(i for i, u in enumerate(inputs) if u is v)))
            steps.append((m, refs))
        out = root.outputs[0]
        fused = Node("FusedElementwise", _fused.DOMAIN, root.name, inputs, [out],
                     {"ops": ", ".join(m.op_type for m in members)}, opset=1, impl=FusedElementwise(), version=1,
                     memo={"steps": steps, "shape": out.shape, "fused": _described(members)})
        out.producer = fused
        replaced[root] = fused
        dead.update(members)
    graph.nodes = [replaced.get(n, n) for n in graph.nodes if n not in dead or n in replaced]
