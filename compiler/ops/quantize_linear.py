from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _quantize as qz
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("QuantizeLinear", since=10)
class QuantizeLinear(OpDef):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, axis or block."""

    def infer(self, node: Node, ctx: InferContext):
        x, scale = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16, dt.INT32), "x")
        check_dtype(ctx, scale.dtype, qz.SCALE_TYPES + (dt.INT32,) if node.version >= 19 else (dt.FLOAT,), "y_scale")
        if 19 <= node.version < 23 and scale.dtype != x.dtype:
            raise ctx.fail(f"y_scale type {scale.dtype} differs from x type {x.dtype}")
        out = _out_dtype(node, ctx)
        check_dtype(ctx, out, tuple(qz.QUANT_TYPES), "y")
        params = [scale.shape] + ([ctx.inp(2).shape] if ctx.has(2) else [])
        for p in params:
            qz.layout(x.shape, p, node.attrs.get("axis", 1), node.attrs.get("block_size", 0), ctx.fail, ctx.dims.same)
        return [(out, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, scale = k.input(0), k.input(1)
        zp = k.input(2) if k.has_input(2) else None
        lay = qz.layout(x.shape, scale.shape, node.attrs.get("axis", 1), node.attrs.get("block_size", 0),
                        k.unsupported, lambda a, b: a)
        data = qz.loop_data(k, "QuantizeLinear", x, [scale] + ([zp] if zp else []), lay)
        precision = node.attrs.get("precision", 0)
        div = dt.from_onnx(precision) if precision else _division_type(x.dtype, scale.dtype)
        ct = qz.compute_of(div)
        ratio = qz.round_to(f"({ct}){x.load('row + i')} / ({ct}){scale.load('s')}", div)
        data["value"] = qz.quantize(ratio, qz.zero_load(zp, "s", ct), k.out.dtype, bool(node.attrs.get("saturate", 1)),
                                    ct)
        return k.kernel("c/quantize.c.j2", helpers=(qz.HELPER, qz.ROUND_HELPER), **data)


def _out_dtype(node: Node, ctx: InferContext) -> dt.DType:
    """The zero point's type, else output_dtype, else uint8."""
    attr = node.attrs.get("output_dtype", 0)
    if ctx.has(2):
        zp = ctx.inp(2).dtype
        if attr and dt.from_onnx(attr) != zp:
            raise ctx.fail(f"output_dtype {dt.from_onnx(attr)} differs from the y_zero_point type {zp}")
        return zp
    return dt.from_onnx(attr) if attr else dt.UINT8


def _division_type(x: dt.DType, scale: dt.DType) -> dt.DType:
    """The type x / y_scale is computed in (numpy promotion, as the reference does)."""
    if x is dt.INT32 or scale is dt.INT32:
        return dt.DOUBLE
    return x if x is scale else dt.FLOAT
