"""com.microsoft DequantizeLinear: onnxruntime's contrib DequantizeLinear (int16/uint16,
int4/uint4 and int32 inputs too); ai.onnx's kernel with the contrib types."""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Node
from . import _qlinear as ql
from . import _quantize as qz
from ._elementwise import check_dtype
from .dequantize_linear import DequantizeLinear
from .registry import InferContext, register

INPUT_TYPES = (dt.INT8, dt.UINT8, dt.INT16, dt.UINT16, dt.INT32, dt.INT4, dt.UINT4)


@register("DequantizeLinear", since=1, domain=ql.MS)
class DequantizeLinearMs(DequantizeLinear):
    """y = (x - x_zero_point) * x_scale, per tensor or along axis, in x_scale's type (float32
    or float16)."""
    formal_inputs = ("x", "x_scale", "x_zero_point")
    formal_outputs = ("y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"axis": 1})
        x, scale = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, INPUT_TYPES, "x")
        check_dtype(ctx, scale.dtype, (dt.FLOAT, dt.FLOAT16), "x_scale")
        if ctx.has(2) and ctx.inp(2).dtype != x.dtype:
            raise ctx.fail(f"x_zero_point type {ctx.inp(2).dtype} differs from x type {x.dtype}")
        for p in [scale.shape] + ([ctx.inp(2).shape] if ctx.has(2) else []):
            qz.layout(x.shape, p, node.attrs["axis"], 0, ctx.fail, ctx.dims.same)
        return [(scale.dtype, x.shape)]
