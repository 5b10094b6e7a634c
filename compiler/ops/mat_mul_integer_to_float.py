"""com.microsoft MatMulIntegerToFloat: the integer product of quantize_dynamic's and the QDQ
optimizer's MatMuls, scaled to float in the same kernel."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("MatMulIntegerToFloat", since=1, domain=ql.MS)
class MatMulIntegerToFloat(OpDef):
    """Y = (A - a_zero_point) @ (B - b_zero_point) * (a_scale * b_scale) + bias, accumulated in
    int32 and scaled in float32 as onnxruntime does (the scale product rounded, then the bias added)."""
    formal_inputs = ("A", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {})
        a, b = ctx.inp(0), ctx.inp(1)
        for t, what in ((a, "A"), (b, "B")):
            if t.dtype not in ql.INT8S:
                raise ctx.fail(f"{what} type {t.dtype} is not int8 or uint8")
        ql.one_value(ctx, 2, dt.FLOAT, "a_scale")
        ql.one_value(ctx, 4, a.dtype, "a_zero_point")
        for i, want, what in ((3, dt.FLOAT, "b_scale"), (5, b.dtype, "b_zero_point"), (6, dt.FLOAT, "bias")):
            if ctx.has(i) and ctx.inp(i).dtype != want:
                raise ctx.fail(f"{what} type {ctx.inp(i).dtype} should be {want}")
        return [(dt.FLOAT, ql.check_integer_matmul(ctx, a, b, 3, 5, 6))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        opt = [k.input(i) if k.has_input(i) else None for i in (5, 6)]
        return ql.integer_matmul_kernel(k, k.input(3), opt[0], opt[1], "(int32_t){A}", dynamic=False,
                                        a_scale=ql.scale(k, 2), a_zero=ql.zero(k, 4))
