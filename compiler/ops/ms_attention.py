"""com.microsoft Attention: BERT's self-attention with its QKV projection, as onnxruntime's
optimizer fuses it, computed by ai.onnx Attention with the mask made additive."""
import numpy as np

from ._contrib import MS, Composite, Expansion, attributes, invalid, refuse
from .registry import register


# The attributes com.microsoft Attention and QAttention share, with onnxruntime's defaults.
ATTRIBUTES = {"num_heads": None, "unidirectional": 0, "scale": None, "mask_filter_value": -10000.0, "do_rotary": 0,
              "past_present_share_buffer": 0}


@register("Attention", since=1, domain=MS)
class MsAttention(Composite):
    """Q, K, V = split(input @ weights + bias); output = softmax(Q K^T * scale + mask) V per head.
    mask_index: key end positions (B), end then start positions (2B), a raw 0/1 mask (B, T) or
    (B, S, T): masked keys get mask_filter_value added, as onnxruntime does. past (2, B, N, P, d)
    is prepended to K and V, present returns the result; unidirectional masks later keys."""
    min_inputs = 2

    def expand(self, node, e):
        attrs = attention_attributes(node, {"qkv_hidden_sizes": None, "rotary_embedding_dim": 0})
        if node.input(6) is not None:
            raise refuse(node, "the past_sequence_length input")
        x, weights = node.inputs[:2]
        sizes = qkv_sizes(node, weights, int(attrs["num_heads"]), attrs.get("qkv_hidden_sizes"))
        qkv = e.op("MatMul", [x, weights])
        if node.input(2) is not None:
            qkv = e.op("Add", [qkv, node.inputs[2]])
        self_attention(e, node, attrs, x, qkv, sizes, mask=node.input(3), past=node.input(4),
                       attention_bias=node.input(5))


def attention_attributes(node, extra: dict) -> dict:
    """The attributes of an Attention-like node (``ATTRIBUTES`` and ``extra``), the variants
    onnxc does not compute refused."""
    attrs = attributes(node, ATTRIBUTES | extra)
    if "num_heads" not in attrs:
        raise invalid(node, "the num_heads attribute is required")
    for name in ("do_rotary", "past_present_share_buffer"):
        if attrs[name]:
            raise refuse(node, f"{name}=1")
    return attrs


def qkv_sizes(node, weights, heads: int, sizes=None) -> tuple:
    """The hidden sizes of Q, K and V: ``sizes`` (qkv_hidden_sizes) or a third of the weights'
    columns each, checked against num_heads."""
    if heads <= 0:
        raise invalid(node, f"num_heads {heads} must be positive")
    if len(weights.shape) != 2:
        raise invalid(node, f"weights must be 2-D (hidden, sum of the Q, K and V sizes), got shape {list(weights.shape)}")
    if not isinstance(weights.shape[1], int):
        raise invalid(node, f"weights of unknown width {weights.shape[1]!r}: their column count must be known")
    sizes = tuple(sizes or (weights.shape[1] // 3,) * 3)
    if len(sizes) != 3 or sizes[0] != sizes[1] or sum(sizes) != weights.shape[1] \
            or any(not isinstance(s, int) or s <= 0 or s % heads for s in sizes):
        raise invalid(node, f"qkv_hidden_sizes {list(sizes)} must be three multiples of num_heads {heads}, "
                            f"the first two equal, adding up to the weights' {weights.shape[1]} columns")
    return sizes


def self_attention(e: Expansion, node, attrs: dict, x, qkv, sizes: tuple, mask, past, attention_bias=None) -> None:
    """Attention's heads from the projected ``qkv`` (B, S, sum(sizes)) of input ``x``, into the
    node's outputs (output, and present when it has one)."""
    heads = int(attrs["num_heads"])
    q, k, v = e.op("Split", [qkv, e.const(np.array(sizes, np.int64))], n_out=3, axis=-1)
    past_kv = [e.op("Gather", [past, e.const(np.array(i, np.int64))], axis=0) for i in (0, 1)] if past else []
    mask = additive_mask(e, node, mask, x, (past, 3) if past else None, attrs["mask_filter_value"])
    if attention_bias is not None:
        mask = attention_bias if mask is None else e.op("Add", [mask, attention_bias])
    present = len(node.outputs) > 1
    extra = {"scale": attrs["scale"]} if "scale" in attrs else {}
    outputs = e.into(0) + ([e.new("present_key"), e.new("present_value")] if present else [])
    e.op("Attention", [q, k, v, mask] + past_kv, outputs, q_num_heads=heads, kv_num_heads=heads,
         is_causal=int(attrs["unidirectional"]), **extra)
    if present:
        halves = [e.op("Unsqueeze", [t, e.const(np.array([0], np.int64))]) for t in outputs[1:]]
        e.op("Concat", halves, e.into(1), axis=0)


def additive_mask(e: Expansion, node, mask, x, past, filter_value: float):
    """mask_index as a float mask added to the scores (broadcasting to (B, N, S, T)): 0 where a
    key is attended, filter_value where it is masked; None without a mask. ``x`` is (B, L, ...)
    with L new keys; ``past`` is (a value, its axis of past keys) or None."""
    if mask is None:
        return None
    zero, masked = e.const(np.array(0, np.float32)), e.const(np.array(filter_value, np.float32))
    rank = len(mask.shape)
    if rank in (2, 3):
        allowed = e.op("Greater", [mask, e.const(np.array(0, mask.dtype.np))])
    elif rank == 1:
        allowed = _key_range(e, node, mask, x, past)
    else:
        raise refuse(node, f"a {rank}-D mask_index")
    axes = [1, 2] if rank != 3 else [1]
    return e.op("Unsqueeze", [e.op("Where", [allowed, zero, masked]), e.const(np.array(axes, np.int64))])


def _key_range(e: Expansion, node, mask, x, past):
    """(B, T) booleans from 1-D mask_index: keys before the end position (B values), or from the
    start to the end position (2B values: the ends, then the starts); told apart at run time."""
    def ints(*values):
        return e.const(np.array(values, np.int64))
    seq = e.op("Shape", [x], start=1, end=2)
    if past is not None:
        cache, axis = past
        seq = e.op("Add", [seq, e.op("Shape", [cache], start=axis, end=axis + 1)])
    keys = e.op("Range", [e.const(np.array(0, np.int64)), e.op("Squeeze", [seq]), e.const(np.array(1, np.int64))])
    rows = e.op("Concat", [ints(-1), e.op("Shape", [x], start=0, end=1), ints(1)], axis=0)
    bounds = e.op("Reshape", [e.op("Cast", [mask], to=7), rows])    # (1 or 2, B, 1)
    ends = e.op("Slice", [bounds, ints(0), ints(1)])
    # the starts row when there is one, else zeros (the maximum of zeros and the starts)
    candidates = e.op("Concat", [e.op("Mul", [ends, ints(0)]), e.op("Slice", [bounds, ints(1), ints(2)])], axis=0)
    starts = e.op("ReduceMax", [candidates, ints(0)], keepdims=0)
    ends = e.op("Squeeze", [ends, ints(0)])
    return e.op("And", [e.op("Less", [keys, ends]), e.op("GreaterOrEqual", [keys, starts])])
