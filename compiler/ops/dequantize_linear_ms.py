"""com.microsoft DequantizeLinear: onnxruntime's contrib DequantizeLinear (int16/uint16,
int4/uint4 and int32 inputs too); the semantics of ai.onnx's with one attribute."""
from __future__ import annotations

from ..ir import Node
from . import _qlinear as ql
from .dequantize_linear import DequantizeLinear
from .registry import InferContext, register


@register("DequantizeLinear", since=1, domain=ql.MS)
class DequantizeLinearMs(DequantizeLinear):
    """y = (x - x_zero_point) * x_scale, per tensor or along axis."""
    formal_inputs = ("x", "x_scale", "x_zero_point")
    formal_outputs = ("y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"axis": 1})
        return super().infer(node, ctx)
