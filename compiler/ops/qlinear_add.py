"""com.microsoft QLinearAdd: onnxruntime's quantized Add."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from ._elementwise import elementwise_kernel
from .registry import InferContext, OpDef, register


@register("QLinearAdd", since=1, domain=ql.MS)
class QLinearAdd(OpDef):
    """C = quantize(dequantize(A) + dequantize(B)) with broadcasting, computed as onnxruntime's
    AVX2 kernel does: with rA = A_scale / C_scale and rB = B_scale / C_scale,
    C = round(fma(A, rA, fma(B, rB, C_zp - fma(rA, A_zp, rB * B_zp)))), saturated; an operand
    that is one value along the innermost axis is added as the product A * rA, rounded."""
    formal_inputs = ("A", "A_scale", "A_zero_point", "B", "B_scale", "B_zero_point", "C_scale", "C_zero_point")
    formal_outputs = ("C",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {})
        return ql.check_binary(node, ctx)

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, c = k.input(0), k.input(3), k.out
        ra = f"({ql.scale(k, 1)} / {ql.scale(k, 6)})"
        rb = f"({ql.scale(k, 4)} / {ql.scale(k, 6)})"
        fixed = (f"((float){ql.zero(k, 7)} - fmaf({ra}, (float){ql.zero(k, 2)}, "
                 f"onnxc_mul_rn({rb}, (float){ql.zero(k, 5)})))")
        scalar_a, scalar_b = ql.constant_in_span(a, c), ql.constant_in_span(b, c)

        def value(v: list[str]) -> str:
            fa, fb = f"(float){v[0]}", f"(float){v[1]}"
            if scalar_a and not scalar_b:
                total = f"fmaf({fb}, {rb}, {fixed} + onnxc_mul_rn({fa}, {ra}))"
            elif scalar_b:
                total = f"fmaf({fa}, {ra}, {fixed} + onnxc_mul_rn({fb}, {rb}))"
            else:
                total = f"fmaf({fa}, {ra}, fmaf({fb}, {rb}, {fixed}))"
            return ql.saturate(total, c)
        kernel = elementwise_kernel(k, [a, b], value)
        kernel.helpers.append(ql.HELPER)
        return kernel
