from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register

_TYPES = (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16)


@register("RotaryEmbedding", since=23)
class RotaryEmbedding(OpDef):
    """Y = X with the first rotary_embedding_dim features of each head rotated by position-dependent angles."""

    def _layout(self, node: Node, ctx: InferContext) -> tuple:
        """(num_heads, head_size, rotary dim) of X, validating the caches."""
        x, cos, sin = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        if x.dtype not in _TYPES or cos.dtype != x.dtype or sin.dtype != x.dtype:
            raise ctx.fail(f"X, cos_cache and sin_cache must share one of float, float16, bfloat16 "
                           f"(got {x.dtype}, {cos.dtype}, {sin.dtype})")
        if len(x.shape) == 4:
            heads, head = x.shape[1], x.shape[3]
        elif len(x.shape) == 3:
            heads = int(node.attrs.get("num_heads", 0))
            hidden = x.shape[2]
            if heads <= 0:
                raise ctx.fail("3-D input needs a positive num_heads")
            if not isinstance(hidden, int):
                raise ctx.fail("the hidden size of a 3-D input must be static")
            if hidden % heads:
                raise ctx.fail(f"hidden size {hidden} is not a multiple of num_heads {heads}")
            head = hidden // heads
        else:
            raise ctx.fail(f"X must be 3-D or 4-D, got shape {x.shape}")
        if not isinstance(head, int):
            raise ctx.fail("the head size must be static")
        rot = int(node.attrs.get("rotary_embedding_dim", 0)) or head
        if rot % 2 or not 0 < rot <= head:
            raise ctx.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
        want = 2 if ctx.has(3) else 3
        for name, c in (("cos_cache", cos), ("sin_cache", sin)):
            if len(c.shape) != want or c.shape[-1] != rot // 2:
                raise ctx.fail(f"{name} must be {want}-D with last dim {rot // 2}, got {c.shape}")
        if ctx.has(3) and (ctx.inp(3).dtype != dt.INT64 or len(ctx.inp(3).shape) != 2):
            raise ctx.fail("position_ids must be a 2-D int64 tensor")
        return heads, head, rot

    def infer(self, node, ctx):
        self._layout(node, ctx)
        x = ctx.inp(0)
        return [(x.dtype, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        heads, head, rot = self._layout(node, InferContext(node, None))
        x, cos, sin = k.input(0), k.input(1), k.input(2)
        four = x.rank == 4
        batch, seq = x.dims[0], x.dims[2] if four else x.dims[1]
        positions = k.input(3) if k.has_input(3) else None
        same = [(sin.dims[0], cos.dims[0])]
        if positions is not None:
            same += [(positions.dims[0], batch), (positions.dims[1], seq)]
        else:
            same += [(cos.dims[0], batch), (cos.dims[1], seq), (sin.dims[1], seq)]
        t = x.dtype
        rnd = {dt.FLOAT: "{}", dt.FLOAT16: "onnxc_round_f16({})", dt.BFLOAT16: "onnxc_round_bf16({})"}[t]
        heads_c = k.dim(heads) if four else heads
        data = {
            "B": cexpr.lit(batch), "H": cexpr.lit(heads_c), "S": cexpr.lit(seq), "head": head,
            "hidden": cexpr.lit(cexpr.mul(heads_c, head)), "half": rot // 2, "four": four,
            "interleaved": bool(node.attrs.get("interleaved", 0)),
            "X": x.name, "Y": k.out.name, "ctype": x.ctype, "load": t.load, "store": t.store, "round": rnd,
            "cos": cos.name, "sin": sin.name,
            "positions": positions.name if positions is not None else None,
            "max_position": cexpr.lit(cos.dims[0]),
            "checks": [f"{cexpr.lit(a)} != {cexpr.lit(b)}" for a, b in same if a != b],
        }
        return k.kernel("c/rotary.c.j2", helpers=("c/helpers/round_half.c.j2",), **data)
