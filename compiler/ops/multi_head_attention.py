"""com.microsoft MultiHeadAttention: attention of projected Q, K, V (self or cross attention,
with a KV cache), as onnxruntime's optimizer fuses it for decoders and diffusion models,
computed by ai.onnx Attention."""
import numpy as np

from ._contrib import MS, Composite, attributes, invalid, refuse
from .ms_attention import additive_mask
from .registry import register


@register("MultiHeadAttention", since=1, domain=MS)
class MultiHeadAttention(Composite):
    """output = softmax((Q + bq)(K + bk)^T * scale + mask + attention_bias)(V + bv) per head, Q
    (B, S, hidden), K and V (B, L, hidden) or already split into heads (B, N, L, d); past_key /
    past_value (B, N, P, d) are prepended to K and V and present_key / present_value return the
    result. key_padding_mask as the Attention op's mask_index (end positions, 2-D or 3-D 0/1 masks;
    masked keys get mask_filter_value)."""

    def expand(self, node, e):
        attrs = attributes(node, {"num_heads": None, "unidirectional": 0, "scale": None, "mask_filter_value": -10000.0})
        if "num_heads" not in attrs:
            raise invalid(node, "the num_heads attribute is required")
        query, key, value = node.input(0), node.input(1), node.input(2)
        if key is None or value is None or len(query.shape) != 3 or len(key.shape) not in (3, 4) \
                or len(value.shape) != len(key.shape):
            raise refuse(node, "packed QKV or KV (only a 3-D query with 3-D or 4-D key and value)")
        for i, what in ((8, "past_sequence_length"), (9, "cache_indirection")):
            if node.input(i) is not None:
                raise refuse(node, f"the {what} input")
        if len(node.outputs) > 3:
            raise refuse(node, "the qk output")
        q, k, v = query, key, value
        if len(key.shape) == 4:
            # keys and values already split into heads (B, N, L, d), as a decoder's cross attention
            # reuses them: back to (B, L, N*d)
            if node.input(3) is not None:
                raise refuse(node, "a bias with 4-D key and value")
            for t in (key, value):
                if not (isinstance(t.shape[1], int) and isinstance(t.shape[3], int)):
                    raise refuse(node, "4-D key and value of symbolic heads or head size")
            k, v = (e.op("Reshape", [e.op("Transpose", [t], perm=(0, 2, 1, 3)),
                                     e.const(np.array([0, 0, t.shape[1] * t.shape[3]], np.int64))])
                    for t in (key, value))
        if node.input(3) is not None:
            sizes = [query.shape[2], key.shape[2], value.shape[2]]
            if not all(isinstance(s, int) for s in sizes):
                raise refuse(node, "a bias with symbolic hidden sizes")
            biases = e.op("Split", [node.inputs[3], e.const(np.array(sizes, np.int64))], n_out=3, axis=0)
            q, k, v = (e.op("Add", [t, b]) for t, b in zip((q, k, v), biases))
        past = node.input(6)
        if (past is None) != (node.input(7) is None):
            raise invalid(node, "past_key and past_value must be given together")
        mask = additive_mask(e, node, node.input(4), k, (past, 2) if past else None, attrs["mask_filter_value"])
        if node.input(5) is not None:
            mask = node.inputs[5] if mask is None else e.op("Add", [mask, node.inputs[5]])
        heads = int(attrs["num_heads"])
        outputs = e.into(0) + [node.outputs[i] for i in (1, 2) if i < len(node.outputs)]
        extra = {"scale": attrs["scale"]} if "scale" in attrs else {}
        past_kv = [node.inputs[6], node.inputs[7]] if past is not None else []
        e.op("Attention", [q, k, v, mask] + past_kv, outputs, q_num_heads=heads, kv_num_heads=heads,
             is_causal=int(attrs["unidirectional"]), **extra)

