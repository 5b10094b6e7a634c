"""com.microsoft QLinearSigmoid: onnxruntime's quantized Sigmoid, a 256-entry table of its
logistic approximation."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("QLinearSigmoid", since=1, domain=ql.MS)
class QLinearSigmoid(OpDef):
    """Y = quantize(logistic(dequantize(X))) through a table, as onnxruntime builds it."""
    formal_inputs = ("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {})
        return ql.check_unary(node, ctx)

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        return ql.lookup_kernel(k, "onnxc_mlas_logistic(x)")
