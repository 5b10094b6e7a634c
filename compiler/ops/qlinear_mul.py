"""com.microsoft QLinearMul: onnxruntime's quantized Mul."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from ._elementwise import elementwise_kernel
from .registry import InferContext, OpDef, register


@register("QLinearMul", since=1, domain=ql.MS)
class QLinearMul(OpDef):
    """C = quantize(dequantize(A) * dequantize(B)) with broadcasting, as onnxruntime computes it:
    round((A - A_zp) (B - B_zp) * (A_scale * B_scale / C_scale) + C_zp) in float32, saturated."""
    formal_inputs = ("A", "A_scale", "A_zero_point", "B", "B_scale", "B_zero_point", "C_scale", "C_zero_point")
    formal_outputs = ("C",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {})
        return ql.check_binary(node, ctx)

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, c = k.input(0), k.input(3), k.out
        multiplier = f"(({ql.scale(k, 1)} * {ql.scale(k, 4)}) / {ql.scale(k, 6)})"

        def value(v: list[str]) -> str:
            product = f"(float)(((int32_t){v[0]} - {ql.zero(k, 2)}) * ((int32_t){v[1]} - {ql.zero(k, 5)}))"
            return ql.saturate(f"onnxc_mul_rn({product}, {multiplier}) + (float){ql.zero(k, 7)}", c)
        kernel = elementwise_kernel(k, [a, b], value)
        kernel.helpers.append(ql.HELPER)
        return kernel
