from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import OpDef, register

_TYPES = (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16)
_ROUND = {dt.FLOAT: "{}", dt.FLOAT16: "onnxc_round_f16({})", dt.BFLOAT16: "onnxc_round_bf16({})"}


@register("CausalConvWithState", since=27)
class CausalConvWithState(OpDef):
    """Depthwise causal 1-D convolution over past_state ++ input, with optional SiLU; returns the new carry state."""

    def infer(self, node, ctx):
        x, w = ctx.inp(0), ctx.inp(1)
        if node.attrs.get("activation", "none") not in ("none", "silu", "swish"):
            raise ctx.fail(f"unknown activation {node.attrs['activation']!r}")
        if x.dtype not in _TYPES or w.dtype != x.dtype:
            raise ctx.fail(f"input and weight must share float, float16 or bfloat16 (got {x.dtype}, {w.dtype})")
        if len(x.shape) != 3 or len(w.shape) != 3 or w.shape[1] != 1:
            raise ctx.fail(f"input must be (B, C, L) and weight (C, 1, k), got {x.shape} and {w.shape}")
        batch, channels, kernel = x.shape[0], ctx.dims.same(x.shape[1], w.shape[0]), w.shape[2]
        if ctx.has(2):
            b = ctx.inp(2)
            if b.dtype != x.dtype or len(b.shape) != 1:
                raise ctx.fail(f"bias must be a 1-D {x.dtype} tensor, got {b.dtype} {b.shape}")
            channels = ctx.dims.same(channels, b.shape[0])
        carry = ctx.dims.sub(kernel, 1)
        if isinstance(carry, int) and carry < 0:
            raise ctx.fail("the kernel size must be at least 1")
        if ctx.has(3):
            s = ctx.inp(3)
            if s.dtype != x.dtype or len(s.shape) != 3:
                raise ctx.fail(f"past_state must be a 3-D {x.dtype} tensor, got {s.dtype} {s.shape}")
            batch = ctx.dims.same(batch, s.shape[0])
            channels = ctx.dims.same(channels, s.shape[1])
            carry = ctx.dims.same(carry, s.shape[2])
        return [(x.dtype, (batch, channels, x.shape[2])), (x.dtype, (batch, channels, carry))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, y, present = k.input(0), k.input(1), k.outputs[0], k.outputs[1]
        t = x.dtype
        return k.kernel(
            "c/causal_conv_with_state.c.j2", helpers=("c/helpers/round_half.c.j2",),
            B=cexpr.lit(y.dims[0]), C=cexpr.lit(y.dims[1]), L=cexpr.lit(y.dims[2]), K=cexpr.lit(w.dims[2]),
            carry=cexpr.lit(present.dims[2]), X=x.name, W=w.name, Y=y.name, present=present.name,
            bias=k.input(2).name if k.has_input(2) else None,
            past=k.input(3).name if k.has_input(3) else None,
            silu=node.attrs.get("activation", "none") != "none",
            load=t.load, store=t.store, round=_ROUND[t], zero=t.store.format("0.0f"))
