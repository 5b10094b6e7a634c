from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register

_TYPES = (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16)
_RULES = ("linear", "gated", "delta", "gated_delta")


@register("LinearAttention", since=27)
class LinearAttention(OpDef):
    """Recurrent linear attention (linear, gated, delta, gated_delta rules) over packed (B, T, H*D) inputs."""

    def _layout(self, node: Node, ctx: InferContext) -> dict:
        """Head counts and sizes, and which decay/beta layout the inputs use."""
        rule = node.attrs.get("update_rule", "gated_delta")
        if rule not in _RULES:
            raise ctx.fail(f"unknown update_rule {rule!r}")
        hq, hkv = int(node.attrs.get("q_num_heads", 0)), int(node.attrs.get("kv_num_heads", 0))
        if hq <= 0 or hkv <= 0 or hq % hkv:
            raise ctx.fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
        q, k, v = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        for name, x in (("query", q), ("key", k), ("value", v)):
            if x.dtype not in _TYPES or x.dtype != q.dtype:
                raise ctx.fail(f"{name} must be float, float16 or bfloat16 like query (got {x.dtype})")
            if len(x.shape) != 3 or not isinstance(x.shape[2], int):
                raise ctx.fail(f"{name} must be 3-D with a static last dim, got {x.shape}")
        if q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
            raise ctx.fail("the last dims of query, key and value must be multiples of their head counts")
        dk, dv = q.shape[2] // hq, v.shape[2] // hkv
        if k.shape[2] != hkv * dk:
            raise ctx.fail(f"key's last dim {k.shape[2]} must be kv_num_heads * d_k = {hkv * dk}")
        gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        layout = {"hq": hq, "hkv": hkv, "dk": dk, "dv": dv, "gating": gating, "delta": delta,
                  "decay_per_key": False, "beta_per_head": False}
        for i, name, wanted, allowed in ((4, "decay", gating, (hkv, hkv * dk)), (5, "beta", delta, (hkv, 1))):
            if ctx.has(i) != wanted:
                raise ctx.fail(f"update_rule {rule!r} {'requires' if wanted else 'forbids'} the {name} input")
            if not wanted:
                continue
            x = ctx.inp(i)
            if x.dtype != q.dtype or len(x.shape) != 3 or x.shape[2] not in allowed:
                raise ctx.fail(f"{name} must be 3-D {q.dtype} with last dim in {allowed}, got {x.dtype} {x.shape}")
            if i == 4:
                layout["decay_per_key"] = x.shape[2] != hkv
            else:
                layout["beta_per_head"] = x.shape[2] == hkv and hkv != 1
        if ctx.has(3):
            s = ctx.inp(3)
            if s.dtype not in _TYPES or len(s.shape) != 4 or tuple(s.shape[1:]) != (hkv, dk, dv):
                raise ctx.fail(f"past_state must be (B, {hkv}, {dk}, {dv}) of a float type, got {s.dtype} {s.shape}")
        return layout

    def infer(self, node, ctx):
        lay = self._layout(node, ctx)
        q = ctx.inp(0)
        batch, seq = q.shape[0], q.shape[1]
        for i in (1, 2, 4, 5):
            if ctx.has(i):
                batch = ctx.dims.same(batch, ctx.inp(i).shape[0])
                seq = ctx.dims.same(seq, ctx.inp(i).shape[1])
        state_type = q.dtype
        if ctx.has(3):
            batch = ctx.dims.same(batch, ctx.inp(3).shape[0])
            state_type = ctx.inp(3).dtype
        return [(q.dtype, (batch, seq, lay["hq"] * lay["dv"])),
                (state_type, (batch, lay["hkv"], lay["dk"], lay["dv"]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        lay = self._layout(node, InferContext(node, None))
        q, key, v, y, present = k.input(0), k.input(1), k.input(2), k.outputs[0], k.outputs[1]
        scale = float(node.attrs.get("scale", 0.0)) or 1.0 / lay["dk"] ** 0.5
        optional = {name: k.input(i) if k.has_input(i) else None
                    for i, name in ((3, "past"), (4, "decay"), (5, "beta"))}
        data = {name: {"name": t.name, "load": t.dtype.load} if t is not None else None
                for name, t in optional.items()}
        kernel = k.kernel(
            "c/linear_attention.c.j2", **lay, **data,
            B=cexpr.lit(y.dims[0]), T=cexpr.lit(y.dims[1]), scale=float_literal(scale, "float"),
            Q=q.name, K=key.name, V=v.name, Y=y.name, present=present.name,
            q_load=q.dtype.load, y_store=y.dtype.store, present_store=present.dtype.store)
        kernel.scratch = {"state": 4 * lay["dk"] * lay["dv"], "update": 4 * lay["dv"]}
        return kernel
