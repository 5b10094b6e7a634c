"""com.microsoft QLinearGlobalAveragePool: onnxruntime's quantized GlobalAveragePool."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from . import _quantize as qz
from .registry import InferContext, OpDef, register


@register("QLinearGlobalAveragePool", since=1, domain=ql.MS)
class QLinearGlobalAveragePool(OpDef):
    """Y[n, c] = requantize(sum(X[n, c, ...] - x_zero_point), x_scale / (y_scale * S)) over the
    S spatial values; channels_last takes X as [N, ..., C] and gives Y [N, 1, ..., C]."""
    formal_inputs = ("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"channels_last": 0})
        ql.check_unary(node, ctx)
        x = ctx.inp(0)
        if len(x.shape) < 3:
            raise ctx.fail(f"X of rank {len(x.shape)} needs a batch, a channel and spatial axes")
        ones = (1,) * (len(x.shape) - 2)
        if node.attrs["channels_last"]:
            return [(x.dtype, (x.shape[0], *ones, x.shape[-1]))]
        return [(x.dtype, (x.shape[0], x.shape[1], *ones))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        last = bool(node.attrs["channels_last"])
        n, c = x.dims[0], x.dims[-1] if last else x.dims[1]
        spatial = cexpr.prod(x.dims[1:-1] if last else x.dims[2:])
        x_index = f"(o * {cexpr.lit(spatial)} + s) * {cexpr.lit(c)} + c" if last \
            else f"(o * {cexpr.lit(c)} + c) * {cexpr.lit(spatial)} + s"
        store = qz.requant("acc", y, ql.zero(k, 4), None, "0", "scale")
        return k.kernel("c/qlinear_global_pool.c.j2", helpers=(qz.REQUANT_HELPER,), x=x.name, y=y.name,
                        N=cexpr.lit(n), C=cexpr.lit(c), S=cexpr.lit(spatial), x_index=x_index,
                        x_scale=ql.scale(k, 1), y_scale=ql.scale(k, 3), x_zero=f"({ql.zero(k, 2)})", store=store)
