"""com.microsoft QuantizeLinear: onnxruntime's contrib QuantizeLinear, which quantize_static
writes for int16/uint16 and int4/uint4 outputs; ai.onnx's kernel with the contrib types."""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Node
from . import _qlinear as ql
from . import _quantize as qz
from ._elementwise import check_dtype
from .quantize_linear import QuantizeLinear
from .registry import InferContext, register

OUTPUT_TYPES = (dt.INT8, dt.UINT8, dt.INT16, dt.UINT16, dt.INT4, dt.UINT4)


@register("QuantizeLinear", since=1, domain=ql.MS)
class QuantizeLinearMs(QuantizeLinear):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor or along axis;
    x and y_scale are both float32 or both float16."""
    formal_inputs = ("x", "y_scale", "y_zero_point")
    formal_outputs = ("y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"axis": 1})
        x, scale = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, (dt.FLOAT, dt.FLOAT16), "x")
        if scale.dtype != x.dtype:
            raise ctx.fail(f"y_scale type {scale.dtype} differs from x type {x.dtype}")
        out = ctx.inp(2).dtype if ctx.has(2) else dt.UINT8
        check_dtype(ctx, out, OUTPUT_TYPES, "y_zero_point")
        for p in [scale.shape] + ([ctx.inp(2).shape] if ctx.has(2) else []):
            qz.layout(x.shape, p, node.attrs["axis"], 0, ctx.fail, ctx.dims.same)
        return [(out, x.shape)]
