"""com.microsoft DynamicQuantizeMatMul: quantize_dynamic's MatMul with int8 weights, A
quantized to uint8 on every run."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("DynamicQuantizeMatMul", since=1, domain=ql.MS)
class DynamicQuantizeMatMul(OpDef):
    """A is quantized to uint8 like DynamicQuantizeLinear (its range widened to hold 0), then
    Y = (A' - a_zero_point) @ (B - b_zero_point) * (a_scale * b_scale) + bias as in MatMulIntegerToFloat."""
    formal_inputs = ("A", "B", "b_scale", "b_zero_point", "bias")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {})
        a, b = ctx.inp(0), ctx.inp(1)
        if a.dtype is not dt.FLOAT:
            raise ctx.fail(f"A type {a.dtype} should be float")
        if b.dtype not in ql.INT8S:
            raise ctx.fail(f"B type {b.dtype} is not int8 or uint8")
        for i, want, what in ((2, dt.FLOAT, "b_scale"), (3, b.dtype, "b_zero_point"), (4, dt.FLOAT, "bias")):
            if ctx.has(i) and ctx.inp(i).dtype != want:
                raise ctx.fail(f"{what} type {ctx.inp(i).dtype} should be {want}")
        return [(dt.FLOAT, ql.check_integer_matmul(ctx, a, b, 2, 3, 4))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        opt = [k.input(i) if k.has_input(i) else None for i in (3, 4)]
        return ql.integer_matmul_kernel(
            k, k.input(2), opt[0], opt[1], ql.saturate_int("rintf({A} / scale_a) + (float)az", dt.UINT8),
            dynamic=True, dynamic_zero=ql.saturate_int("0.0f - lo / scale_a", dt.UINT8))
