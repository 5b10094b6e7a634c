from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _quantize as qz
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("DynamicQuantizeLinear", since=11)
class DynamicQuantizeLinear(OpDef):
    """Quantizes x to uint8 with a scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255]."""

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, (dt.FLOAT,), "x")
        return [(dt.UINT8, x.shape), (dt.FLOAT, ()), (dt.UINT8, ())]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        y, scale, zero = k.outputs
        return k.kernel("c/dynamic_quantize.c.j2", helpers=(qz.HELPER,), x=x.name, n=cexpr.lit(x.numel),
                        y=y.name, y_scale=scale.name, y_zero_point=zero.name,
                        zero=qz.saturate("rint((double)(0.0f - lo / scale))", dt.UINT8),
                        value=qz.quantize(f"{x.name}[i] / scale", "(float)zp", dt.UINT8, True, "float"))
