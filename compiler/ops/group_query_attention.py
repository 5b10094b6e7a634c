"""com.microsoft GroupQueryAttention: the decoder attention of onnxruntime's generative models
(Llama, Phi, Mistral), with grouped KV heads and a KV cache whose rows per batch entry are
given by seqlens_k; computed by standard nodes and ai.onnx Attention."""
import numpy as np

from ._contrib import MS, Composite, attributes, invalid, refuse
from .registry import register

_DEFAULTS = {"num_heads": None, "kv_num_heads": None, "scale": None, "softcap": 0.0, "local_window_size": -1,
             "do_rotary": 0, "rotary_interleaved": 0, "smooth_softmax": -1, "qk_output": 0,
             "sliding_window_cache": 0, "kv_cache_bit_width": 0, "k_quant_type": "NONE", "v_quant_type": "NONE",
             "q_norm_epsilon": None, "k_norm_epsilon": None, "qk_norm_epsilon": None, "causal": 1}
# attribute -> the value this lowering supports (others are refused by name)
_ONLY = {"softcap": 0.0, "local_window_size": -1, "smooth_softmax": -1, "qk_output": 0,
         "sliding_window_cache": 0, "kv_cache_bit_width": 0, "k_quant_type": "NONE", "v_quant_type": "NONE",
         "causal": 1}


@register("GroupQueryAttention", since=1, domain=MS)
class GroupQueryAttention(Composite):
    """query (B, S, N*d), key and value (B, S, Nkv*d), or query (B, S, (N + 2 Nkv) d) holding all
    three (packed QKV, key and value omitted); past_key / past_value (B, Nkv, P, d).
    Batch entry b holds seqlens_k[b] + 1 tokens after this step: its S new keys and values go to
    rows seqlens_k[b] + 1 - S ... of the cache, whose length is max(P, total_sequence_length) and
    whose later rows are zeros, and query i attends to the cache rows up to its own position
    (causal). Without a past (a first prompt) the new tokens fill rows 0 ... S-1 and the keys
    after row seqlens_k[b] are padding. do_rotary rotates Q and K (ai.onnx RotaryEmbedding of
    cos_cache and sin_cache) at the positions of their cache rows."""

    def expand(self, node, e):
        attrs = attributes(node, _DEFAULTS)
        for name in ("num_heads", "kv_num_heads"):
            if name not in attrs:
                raise invalid(node, f"the {name} attribute is required")
        for name, value in _ONLY.items():
            if attrs[name] != value:
                raise refuse(node, f"{name}={attrs[name]!r}")
        rotary = bool(attrs["do_rotary"])
        if rotary and (node.input(7) is None or node.input(8) is None):
            raise invalid(node, "do_rotary=1 needs cos_cache and sin_cache")
        for i, what in enumerate(node.inputs[7:], start=7):
            if what is not None and not (rotary and i in (7, 8)):
                raise refuse(node, f"input {i} (rotary caches without do_rotary, position_ids, attention_bias, "
                                   f"head_sink, quantized cache scales, QK norms, query_seqlens)")
        q, k, v, past_key, past_value, seqlens, total = (node.input(i) for i in range(7))
        if (past_key is None) != (past_value is None):
            raise invalid(node, "past_key and past_value must be given together")
        if (k is None) != (v is None):
            raise invalid(node, "key and value must be given together (neither for packed QKV)")
        heads, kv_heads = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
        dtype = q.dtype.np
        if not isinstance(q.shape[-1], int):
            raise refuse(node, "a symbolic hidden size")
        d = q.shape[-1] // (heads if k is not None else heads + 2 * kv_heads)
        if k is None:
            # packed QKV: query holds the N query heads, then the Nkv key and the Nkv value heads
            if q.shape[-1] != (heads + 2 * kv_heads) * d:
                raise invalid(node, f"packed QKV of {q.shape[-1]} columns is not (num_heads + 2 * kv_num_heads) "
                                    f"heads of one size")
            sizes = e.const(np.array([heads * d, kv_heads * d, kv_heads * d], np.int64))
            q, k, v = e.op("Split", [q, sizes], n_out=3, axis=-1)

        def ints(*values):
            return e.const(np.array(values, np.int64))

        def heads_first(x, n):
            return e.op("Transpose", [e.op("Reshape", [x, ints(0, 0, n, d)])], perm=(0, 2, 1, 3))
        seq = e.op("Shape", [q], start=1, end=2)
        total = e.op("Reshape", [e.op("Cast", [total], to=7), ints(1)])
        length = total if past_key is None else e.op("Max", [total, e.op("Shape", [past_key], start=2, end=3)])
        rows = e.op("Range", [e.const(np.array(0, np.int64)), e.op("Squeeze", [length]),
                              e.const(np.array(1, np.int64))])
        last_row = e.op("Reshape", [e.op("Cast", [seqlens], to=7), ints(-1, 1, 1, 1)])
        # first cache row of each entry's new tokens, as (B, 1, 1, 1); a first prompt (no past)
        # starts at row 0 and is right-padded beyond last_row
        start = e.const(np.zeros((1, 1, 1, 1), np.int64)) if past_key is None else \
            e.op("Sub", [e.op("Add", [last_row, ints(1)]), seq])
        if rotary:
            # token i of entry b is at position start_b + i, its cache row
            steps = e.op("Range", [e.const(np.array(0, np.int64)), e.op("Squeeze", [seq]),
                                   e.const(np.array(1, np.int64))])
            positions = e.op("Expand", [e.op("Add", [e.op("Reshape", [start, ints(-1, 1)]), steps]),
                                        e.op("Shape", [q], start=0, end=2)])
            cos, sin = node.inputs[7:9]
            rotated = {"interleaved": attrs["rotary_interleaved"],
                       "rotary_embedding_dim": 2 * cos.shape[1] if cos.shape[1] != d // 2 else 0}
            q, k = (e.op("RotaryEmbedding", [x, cos, sin, positions], num_heads=n, **rotated)
                    for x, n in ((q, heads), (k, kv_heads)))
        new_key, new_value = heads_first(k, kv_heads), heads_first(v, kv_heads)
        offset = e.op("Sub", [e.op("Reshape", [rows, ints(1, 1, -1, 1)]), start])      # (B, 1, T, 1)
        written = e.op("Less", [offset, seq])     # rows after the new tokens are zeros, as onnxruntime leaves them
        fresh = e.op("And", [e.op("GreaterOrEqual", [offset, ints(0)]), written])
        zero = e.const(np.array(0, dtype))
        index = e.op("Max", [e.op("Min", [offset, e.op("Sub", [seq, ints(1)])]), ints(0)])
        presents = []
        for new, past, out in ((new_key, past_key, 1), (new_value, past_value, 2)):
            if past is None:
                base = e.op("Expand", [e.op("Mul", [e.op("ReduceSum", [new, ints(2)], keepdims=1),
                                                    e.const(np.array(0, dtype))]),
                                       e.op("Concat", [e.op("Shape", [new], start=0, end=2), length, ints(d)],
                                            axis=0)])
            else:
                grow = e.op("Sub", [length, e.op("Shape", [past], start=2, end=3)])
                base = e.op("Pad", [past, e.op("Concat", [ints(0, 0, 0, 0, 0, 0), grow, ints(0)], axis=0)])
            gathered = e.op("GatherElements", [new, e.op("Expand", [index, e.op("Shape", [base])])], axis=2)
            kept = e.op("Where", [written, base, zero])
            presents.append(e.op("Where", [fresh, gathered, kept], e.into(out)))
        # query i of entry b sits at cache row start_b + i and attends to the rows up to it
        query_rows = e.op("Add", [start, e.op("Reshape", [e.op("Range", [e.const(np.array(0, np.int64)),
                                                                         e.op("Squeeze", [seq]),
                                                                         e.const(np.array(1, np.int64))]),
                                                          ints(1, 1, -1, 1)])])
        key_rows = e.op("Reshape", [rows, ints(1, 1, 1, -1)])
        allowed = e.op("LessOrEqual", [key_rows, query_rows])
        if past_key is None:
            allowed = e.op("And", [allowed, e.op("LessOrEqual", [key_rows, last_row])])
        extra = {"scale": attrs["scale"]} if "scale" in attrs else {}
        y = e.op("Attention", [heads_first(q, heads), presents[0], presents[1], allowed], **extra)
        merged = e.op("Transpose", [y], perm=(0, 2, 1, 3))
        e.op("Reshape", [merged, ints(0, 0, heads * d)], e.into(0))
