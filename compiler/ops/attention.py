import math

import numpy as np
from onnx import TensorProto

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register

# softmax_precision values the spec allows.
_PRECISIONS = {TensorProto.FLOAT: dt.FLOAT, TensorProto.FLOAT16: dt.FLOAT16,
               TensorProto.DOUBLE: dt.DOUBLE, TensorProto.BFLOAT16: dt.BFLOAT16}
_MASK_TYPES = dt.NUMERIC + (dt.BOOL,)


@register("Attention", since=23)
class Attention(OpDef):
    """Y = softmax(Q K^T * scale + bias) V with GQA, masks, causal/window masking and a KV cache."""

    def _heads(self, node: Node, ctx: InferContext) -> tuple:
        """(q_num_heads, kv_num_heads, head_size, v_head_size) as dims, checking Q/K/V."""
        q, k, v = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        for name, t in (("Q", q), ("K", k)):
            if t.dtype not in dt.FLOATS:
                raise ctx.fail(f"{name} type {t.dtype} is not a float type")
        if k.dtype != q.dtype:
            raise ctx.fail(f"K type {k.dtype} differs from Q type {q.dtype}")
        if v.dtype not in dt.FLOATS:
            raise ctx.fail(f"V type {v.dtype} is not a float type")
        rank = len(q.shape)
        if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
            raise ctx.fail(f"Q, K and V must all be 3-D or all 4-D, got {q.shape}, {k.shape}, {v.shape}")
        attrs = node.attrs
        if rank == 4:
            if node.version >= 25 and ("q_num_heads" in attrs or "kv_num_heads" in attrs):
                raise ctx.fail("q_num_heads and kv_num_heads must not be given with 4-D inputs")
            hq, hkv, d, dv = q.shape[1], k.shape[1], q.shape[3], v.shape[3]
            ctx.dims.same(k.shape[3], d)
            ctx.dims.same(v.shape[1], hkv)
        else:
            if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
                raise ctx.fail("3-D inputs need the q_num_heads and kv_num_heads attributes")
            hq, hkv = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
            if hq <= 0 or hkv <= 0:
                raise ctx.fail("q_num_heads and kv_num_heads must be positive")
            d = _split(ctx, q.shape[2], hq, "Q")
            if _split(ctx, k.shape[2], hkv, "K") != d:
                raise ctx.fail(f"Q head size {d} and K head size differ")
            dv = _split(ctx, v.shape[2], hkv, "V")
        if isinstance(hq, int) and isinstance(hkv, int) and (hkv == 0 or hq % hkv):
            raise ctx.fail(f"q_num_heads {hq} is not a multiple of kv_num_heads {hkv}")
        ctx.dims.same(k.shape[0], q.shape[0])
        ctx.dims.same(v.shape[0], q.shape[0])
        kv_seq = k.shape[2] if rank == 4 else k.shape[1]
        ctx.dims.same(v.shape[2] if rank == 4 else v.shape[1], kv_seq)
        return hq, hkv, d, dv

    def infer(self, node, ctx):
        q = ctx.inp(0)
        hq, hkv, d, dv = self._heads(node, ctx)
        rank = len(q.shape)
        batch = q.shape[0]
        q_seq = q.shape[2] if rank == 4 else q.shape[1]
        kv_seq = ctx.inp(1).shape[2] if rank == 4 else ctx.inp(1).shape[1]
        if ctx.has(4) != ctx.has(5):
            raise ctx.fail("past_key and past_value must be given together")
        total = kv_seq
        if ctx.has(4):
            if ctx.has(6):
                raise ctx.fail("nonpad_kv_seqlen cannot be used with past_key and past_value")
            pk, pv = ctx.inp(4), ctx.inp(5)
            if len(pk.shape) != 4 or len(pv.shape) != 4:
                raise ctx.fail("past_key and past_value must be 4-D")
            if pk.dtype != q.dtype or pv.dtype != ctx.inp(2).dtype:
                raise ctx.fail("past_key / past_value types differ from K / V")
            for t, last in ((pk, d), (pv, dv)):
                ctx.dims.same(t.shape[0], batch)
                ctx.dims.same(t.shape[1], hkv)
                ctx.dims.same(t.shape[3], last)
            ctx.dims.same(pv.shape[2], pk.shape[2])
            total = ctx.dims.add(pk.shape[2], kv_seq)
        if ctx.has(3):
            mask = ctx.inp(3)
            if mask.dtype not in _MASK_TYPES:
                raise ctx.fail(f"attn_mask type {mask.dtype} is not supported")
            if not 1 <= len(mask.shape) <= 4:
                raise ctx.fail(f"attn_mask must have rank 1 to 4, got {mask.shape}")
            target = (batch, hq, q_seq)[4 - len(mask.shape):]
            for m, t in zip(mask.shape[:-1], target):
                if isinstance(m, int) and isinstance(t, int) and m not in (1, t):
                    raise ctx.fail(f"attn_mask shape {mask.shape} does not broadcast to {(batch, hq, q_seq, total)}")
            last = mask.shape[-1]
            if isinstance(last, int) and isinstance(total, int) and last > total:
                raise ctx.fail(f"attn_mask is longer ({last}) than the total sequence length {total}")
        if ctx.has(6):
            nonpad = ctx.inp(6)
            if nonpad.dtype != dt.INT64 or len(nonpad.shape) != 1:
                raise ctx.fail("nonpad_kv_seqlen must be a 1-D int64 tensor")
            ctx.dims.same(nonpad.shape[0], batch)
        precision = node.attrs.get("softmax_precision")
        if precision is not None and precision not in _PRECISIONS:
            raise ctx.fail(f"softmax_precision {precision} is not supported")
        if node.attrs.get("qk_matmul_output_mode", 0) not in (0, 1, 2, 3):
            raise ctx.fail(f"qk_matmul_output_mode {node.attrs['qk_matmul_output_mode']} is not 0 to 3")
        for side in ("left_window_size", "right_window_size"):
            if node.attrs.get(side, -1) < -1:
                raise ctx.fail(f"{side} must be -1 or nonnegative")
        if rank == 4:
            y = (batch, hq, q_seq, dv)
        else:
            y = (batch, q_seq, ctx.dims.mul(hq, dv))
        v_dtype = ctx.inp(2).dtype
        return [(q.dtype, y), (q.dtype, (batch, hkv, total, d)), (v_dtype, (batch, hkv, total, dv)),
                (q.dtype, (batch, hq, q_seq, total))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        q, key, v = k.input(0), k.input(1), k.input(2)
        attrs = node.attrs
        rank = q.rank
        four = rank == 4
        if four:
            hq, hkv, d, dv = q.dims[1], key.dims[1], q.dims[3], v.dims[3]
            q_seq, kv_seq = q.dims[2], key.dims[2]
        else:
            hq, hkv = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
            d, dv = _split_c(q.dims[2], hq), _split_c(v.dims[2], hkv)
            q_seq, kv_seq = q.dims[1], key.dims[1]
        past = k.has_input(4)
        mask = k.input(3) if k.has_input(3) else None
        nonpad = k.input(6) if k.has_input(6) else None
        outputs = dict(enumerate(k.outputs))
        compute = "double" if dt.DOUBLE in (q.dtype, v.dtype) else "float"
        precision = attrs.get("softmax_precision")
        sm_dtype = _PRECISIONS[precision] if precision is not None else q.dtype
        softmax_t = "double" if sm_dtype is dt.DOUBLE else "float"
        past_key = k.input(4) if past else None
        past_value = k.input(5) if past else None
        checks: list[dict] = []
        if not four:
            for t, heads in ((q, hq), (key, hkv), (v, hkv)):
                if isinstance(t.dims[2], str):
                    _check(checks, f"{t.dims[2]} % {heads} != 0",
                           f"{t.name} hidden size is not a multiple of the heads")
        if isinstance(hq, str) or isinstance(hkv, str):
            _check(checks, "Hkv == 0 || Hq % Hkv != 0", "q heads are not a multiple of kv heads")
        batch = q.dims[0]
        same = [(key.dims[0], batch), (v.dims[0], batch), (v.dims[2 if four else 1], kv_seq),
                (key.dims[3] if four else _split_c(key.dims[2], hkv), d)]
        if four:
            same.append((v.dims[1], hkv))
        for t, last in ((past_key, d), (past_value, dv)):
            if t is not None:
                same += [(t.dims[0], batch), (t.dims[1], hkv), (t.dims[2], past_key.dims[2]), (t.dims[3], last)]
        if nonpad is not None:
            same.append((nonpad.dims[0], batch))
        for a, b in same:
            if a != b:
                _check(checks, f"{cexpr.lit(a)} != {cexpr.lit(b)}", "input shapes do not match")
        mask_data = None
        if mask is not None:
            mask_data = _mask_layout(mask, [batch, hq, q_seq], checks)
            if isinstance(mask.dims[-1], str):
                _check(checks, f"{mask.dims[-1]} > T", "attn_mask is longer than the total sequence")
        mode = attrs.get("qk_matmul_output_mode", 0)
        softcap = float(attrs.get("softcap", 0.0))
        left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
        data = {
            "four": four, "dims": {"B": cexpr.lit(q.dims[0]), "Hq": cexpr.lit(hq), "Hkv": cexpr.lit(hkv),
                                   "Sq": cexpr.lit(q_seq), "Skv": cexpr.lit(kv_seq), "D": cexpr.lit(d),
                                   "Dv": cexpr.lit(dv)},
            "P": cexpr.lit(past_key.dims[2]) if past else None,
            "checks": checks, "compute": compute, "softmax_t": softmax_t,
            "fn": "" if compute == "double" else "f", "sm_fn": "" if softmax_t == "double" else "f",
            "sqrt_scale": _sqrt_scale(attrs.get("scale"), d, q.dtype, compute),
            "softcap": _literal(softcap, compute) if softcap > 0 else None,
            "causal": bool(attrs.get("is_causal", 0)), "left": left, "right": right,
            "mask": mask_data, "nonpad": nonpad.name if nonpad is not None else None,
            "q": _tensor(q), "k": _tensor(key), "v": _tensor(v),
            "past_key": past_key.name if past else None, "past_value": past_value.name if past else None,
            "Y": _tensor(k.outputs[0]),
            "present_key": outputs[1].name if 1 in outputs else None,
            "present_value": outputs[2].name if 2 in outputs else None,
            "qk": {"name": outputs[3].name, "mode": mode, "store": outputs[3].store("{}")} if 3 in outputs else None,
            "round_q": _round_trip(q.dtype, compute), "round_sm": _round_trip(sm_dtype, softmax_t),
            "sequential_sum": sm_dtype is dt.BFLOAT16,
        }
        total = cexpr.add(past_key.dims[2], kv_seq) if past else kv_seq
        kernel = k.kernel("c/attention.c.j2", helpers=("c/helpers/round_half.c.j2",), **data)
        kernel.scratch = {"scores": cexpr.mul(total, 8), "acc": cexpr.mul(dv, 8)}
        return kernel


def _check(checks: list, cond: str, msg: str) -> None:
    checks.append({"cond": cond, "msg": f'"Attention: {msg}"'})


def _split(ctx: InferContext, hidden, heads: int, name: str):
    if isinstance(hidden, int):
        if hidden % heads:
            raise ctx.fail(f"{name} hidden size {hidden} is not a multiple of {heads} heads")
        return hidden // heads
    return ctx.dims.floordiv(hidden, heads)


def _split_c(hidden: cexpr.CExpr, heads: int) -> cexpr.CExpr:
    return cexpr.div(hidden, heads)


def _tensor(t: TensorRef) -> dict:
    return {"name": t.name, "ctype": t.ctype, "load": t.dtype.load, "store": t.dtype.store}


def _literal(x: float, ctype: str) -> str:
    text = repr(float(x))
    if "." not in text and "e" not in text:
        text += ".0"
    return text if ctype == "double" else text + "f"


def _sqrt_scale(scale, d, dtype: dt.DType, compute: str) -> str:
    """sqrt(scale) rounded to Q's type, as the reference casts it (Q and K are both scaled by it)."""
    if scale is None:
        if not isinstance(d, int):
            return _round_trip(dtype, "double").format(f"sqrt(1.0 / sqrt((double){d}))")
        scale = 1.0 / math.sqrt(d)
    value = float(np.sqrt(np.float64(scale)).astype(dtype.np))
    return _literal(value, compute)


def _round_trip(t: dt.DType, compute: str) -> str:
    """C expression template rounding a ``compute`` value to type ``t``, as the reference computes
    each step in Q's type (float16/bfloat16 round after every operation)."""
    if t is dt.DOUBLE or (t is dt.FLOAT and compute == "float"):
        return "{}"
    if t is dt.FLOAT:
        return "(float)({})"
    return "onnxc_round_f16({})" if t is dt.FLOAT16 else "onnxc_round_bf16({})"


def _mask_layout(mask: TensorRef, target: list, checks: list) -> dict:
    """Strides of attn_mask over (batch, q_num_heads, q_sequence_length); its last axis is the key axis."""
    lead = target[4 - mask.rank:] if mask.rank > 1 else []
    pad = 3 - len(lead)
    strides = ["0"] * pad
    for axis, (m, t) in enumerate(zip(mask.dims[:-1], lead)):
        s = mask.strides[axis]
        if m == 1:
            strides.append("0")
        elif m == t:
            strides.append(cexpr.lit(s))
        else:
            _check(checks, f"{m} != 1 && {m} != {t}", "attn_mask does not broadcast to the attention scores")
            strides.append(f"({m} == 1 ? 0 : {cexpr.lit(s)})")
    terms = [f"{var} * {s}" if s != "1" else var for var, s in zip("bhi", strides) if s != "0"]
    return {"name": mask.name, "bool": mask.dtype is dt.BOOL, "load": mask.dtype.load,
            "len": cexpr.lit(mask.dims[-1]), "row": " + ".join(terms) or "0"}
