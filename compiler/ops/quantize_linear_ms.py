"""com.microsoft QuantizeLinear: onnxruntime's contrib QuantizeLinear, which quantize_static
writes for int16/uint16 and int4/uint4 outputs; the semantics of ai.onnx's with one attribute."""
from __future__ import annotations

from ..ir import Node
from . import _qlinear as ql
from .quantize_linear import QuantizeLinear
from .registry import InferContext, register


@register("QuantizeLinear", since=1, domain=ql.MS)
class QuantizeLinearMs(QuantizeLinear):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor or along axis."""
    formal_inputs = ("x", "y_scale", "y_zero_point")
    formal_outputs = ("y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"axis": 1})
        return super().infer(node, ctx)
