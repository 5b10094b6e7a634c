"""ai.onnx.preview FlexAttention: attention whose scores and probabilities pass through the
model's own subgraphs, score_mod and prob_mod.

A modifier takes the whole (B, Hq, L, S) tensor (positions come from its shape, as Shape and
Range nodes inside it), so the node becomes standard nodes during shape inference, the
modifiers' nodes spliced in on that tensor: Q K^T, score_mod, Softmax, prob_mod, times V.
The arithmetic follows onnx's reference: Q and K are each scaled by sqrt(scale) (taken in
float32, then in the input type), Q K^T runs in the input type and the rest in the softmax
precision (float32 for 16-bit inputs unless softmax_precision says otherwise).
"""
import numpy as np

from .. import dtypes as dt
from ..errors import ModelError
from ..ir import Node, Value
from ._contrib import Composite, Expansion, invalid
from .registry import register

# softmax_precision values the spec allows.
_PRECISIONS = {t.onnx: t for t in (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16, dt.DOUBLE)}


@register("FlexAttention", since=1, domain="ai.onnx.preview")
class FlexAttention(Composite):
    """Y = prob_mod(softmax(score_mod(Q K^T * scale))) V over (B, H, L, E) tensors; a K/V head serves
    q_num_heads / kv_num_heads consecutive query heads (GQA)."""

    def expand(self, node, e):
        q, k, v = _checked_inputs(node)
        precision = node.attrs.get("softmax_precision")
        if precision is not None and precision not in _PRECISIONS:
            raise invalid(node, f"softmax_precision {precision} is not float, float16, bfloat16 or double")
        if precision is not None:
            compute = _PRECISIONS[precision]
        else:
            compute = dt.DOUBLE if q.dtype == dt.DOUBLE else dt.FLOAT

        root = _sqrt_scale(node, e, q)
        queries, keys = e.op("Mul", [q, root]), e.op("Mul", [k, root])
        grouped = q.shape[1] != k.shape[1]
        if grouped:
            # Each K/V head's group of query heads as one longer query sequence: the batched
            # products then pair every query head with its K/V head without copying K or V.
            queries = e.op("Reshape", [queries, _shape(e, (q, 0, 1), (k, 1, 2), -1, (q, 3, 4))])
        scores = e.op("MatMul", [queries, e.op("Transpose", [keys], perm=(0, 1, 3, 2))])
        if grouped:
            scores = e.op("Reshape", [scores, _shape(e, (q, 0, 3), (k, 2, 3))])
        scores = _splice(node, e, "score_mod", _cast(e, scores, q.dtype, compute), compute)
        probs = _splice(node, e, "prob_mod", e.op("Softmax", [scores], axis=-1), compute)
        if grouped:
            probs = e.op("Reshape", [probs, _shape(e, (q, 0, 1), (k, 1, 2), -1, (k, 2, 3))])
        values = _cast(e, v, v.dtype, compute)
        out = e.op("MatMul", [probs, values])
        if grouped:
            out = e.op("Reshape", [out, _shape(e, (q, 0, 3), (v, 3, 4))])
        e.op("Cast", [out], e.into(0), to=v.dtype.onnx)   # a no-op Cast is removed by simplification


def _checked_inputs(node: Node) -> tuple[Value, Value, Value]:
    if len(node.inputs) != 3 or any(x is None for x in node.inputs):
        raise invalid(node, "Q, K and V are required")
    q, k, v = node.inputs
    for name, x in zip("QKV", (q, k, v)):
        if not x.is_tensor or x.dtype not in dt.FLOATS:
            raise invalid(node, f"{name} is {x.type_str()}, not a float tensor")
        if len(x.shape) != 4:
            raise invalid(node, f"{name} has shape {list(x.shape)}; it must have rank 4 (B, H, L, E)")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise invalid(node, f"Q, K and V are {q.dtype}, {k.dtype} and {v.dtype}: they must be one type")
    agree = (("K and Q head sizes", k.shape[3], q.shape[3]), ("K and V heads", k.shape[1], v.shape[1]),
             ("K and V sequence lengths", k.shape[2], v.shape[2]), ("Q and K batch sizes", q.shape[0], k.shape[0]),
             ("Q and V batch sizes", q.shape[0], v.shape[0]))
    for what, a, b in agree:
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise invalid(node, f"the {what} differ ({a} and {b})")
    hq, hkv = q.shape[1], k.shape[1]
    if isinstance(hq, int) and isinstance(hkv, int) and (hkv == 0 or hq % hkv):
        raise invalid(node, f"Q's {hq} heads are not a multiple of K's and V's {hkv}")
    return q, k, v


def _sqrt_scale(node: Node, e: Expansion, q: Value) -> Value:
    """sqrt(scale) in Q's type, the scale (default 1 / sqrt(head size)) rounded to float32 first."""
    scale, head_size = node.attrs.get("scale"), q.shape[3]
    if scale is None and isinstance(head_size, int):
        scale = 1.0 / np.sqrt(head_size)
    if scale is not None:
        return e.const(np.sqrt(np.float32(scale)).astype(q.dtype.np))
    size = e.op("Cast", [e.op("Shape", [q], start=3, end=4)], to=dt.DOUBLE.onnx)
    scale = e.op("Cast", [e.op("Reciprocal", [e.op("Sqrt", [size])])], to=dt.FLOAT.onnx)
    return _cast(e, e.op("Sqrt", [scale]), dt.FLOAT, q.dtype)


def _shape(e: Expansion, *parts: "int | tuple[Value, int, int]") -> Value:
    """A shape tensor from (value, start, end) slices of input shapes and int constants."""
    pieces = [e.const(np.array([p], np.int64)) if isinstance(p, int) else
              e.op("Shape", [p[0]], start=p[1], end=p[2]) for p in parts]
    return e.op("Concat", pieces, axis=0)


def _cast(e: Expansion, x: Value, have: dt.DType, want: dt.DType) -> Value:
    return x if have == want else e.op("Cast", [x], to=want.onnx)


def _splice(node: Node, e: Expansion, attr: str, x: Value, compute: dt.DType) -> Value:
    """The nodes of modifier ``attr`` applied to ``x``, their result cast to ``compute`` as the
    reference does; ``x`` unchanged without the modifier."""
    body = node.subgraphs.get(attr)
    if body is None:
        return x
    if len(body.inputs) != 1 or len(body.outputs) != 1:
        raise invalid(node, f"{attr} must have one input and one output, not {len(body.inputs)} and "
                            f"{len(body.outputs)}")
    formal = body.inputs[0]
    if not formal.is_tensor or (formal.dtype is not None and formal.dtype != compute):
        raise ModelError(f"{node.label}: {attr} takes {formal.type_str()}; its input is a {compute} tensor "
                         f"(the softmax precision)")
    body.replace_uses(formal, x)
    e.nodes.extend(body.nodes)
    return e.op("Cast", [body.outputs[0]], to=compute.onnx)
