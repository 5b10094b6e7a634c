from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _quantize as qz
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("DequantizeLinear", since=10)
class DequantizeLinear(OpDef):
    """y = (x - x_zero_point) * x_scale, per tensor, axis or block."""

    def infer(self, node: Node, ctx: InferContext):
        x, scale = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, qz.DEQUANT_TYPES, "x")
        check_dtype(ctx, scale.dtype, qz.SCALE_TYPES if node.version >= 19 else (dt.FLOAT,), "x_scale")
        if ctx.has(2) and ctx.inp(2).dtype != x.dtype:
            raise ctx.fail(f"x_zero_point type {ctx.inp(2).dtype} differs from x type {x.dtype}")
        params = [scale.shape] + ([ctx.inp(2).shape] if ctx.has(2) else [])
        for p in params:
            qz.layout(x.shape, p, node.attrs.get("axis", 1), node.attrs.get("block_size", 0), ctx.fail, ctx.dims.same)
        out = node.attrs.get("output_dtype", 0)
        out_dtype = dt.from_onnx(out) if out else scale.dtype
        check_dtype(ctx, out_dtype, qz.FLOAT_TYPES, "y")
        return [(out_dtype, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, scale = k.input(0), k.input(1)
        zp = k.input(2) if k.has_input(2) else None
        lay = qz.layout(x.shape, scale.shape, node.attrs.get("axis", 1), node.attrs.get("block_size", 0),
                        k.unsupported, lambda a, b: a)
        data = qz.loop_data(k, "DequantizeLinear", x, [scale] + ([zp] if zp else []), lay)
        data["value"] = k.out.store(f"{qz.dequantize(x, zp, 'row + i', 's')} * {scale.load('s')}")
        return k.kernel("c/quantize.c.j2", **data)
