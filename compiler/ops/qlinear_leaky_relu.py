"""com.microsoft QLinearLeakyRelu: onnxruntime's quantized LeakyRelu, through a 256-entry table."""
from __future__ import annotations

import numpy as np

from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("QLinearLeakyRelu", since=1, domain=ql.MS)
class QLinearLeakyRelu(OpDef):
    """Y = quantize(x >= 0 ? x : alpha * x) of the dequantized X, through a table."""
    formal_inputs = ("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"alpha": 0.01})
        return ql.check_unary(node, ctx)

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        alpha = f"{float(np.float32(node.attrs['alpha']))!r}f"
        return ql.lookup_kernel(k, f"(x >= 0.0f ? x : onnxc_mul_rn({alpha}, x))")
