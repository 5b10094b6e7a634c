"""com.microsoft QLinearAveragePool: onnxruntime's quantized AveragePool."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from ..errors import UnsupportedError
from ..ir import Node
from . import _qlinear as ql
from ._conv_pool import Pool
from .registry import InferContext, register


@register("QLinearAveragePool", since=1, domain=ql.MS)
class QLinearAveragePool(Pool):
    """AveragePool of the dequantized X as onnxruntime computes it: each (x - x_zero_point) *
    x_scale in float32, summed over the window in order, divided by the count, then
    y = round(mean / y_scale) + y_zero_point, saturated. NCHW only."""
    kind = "avg"
    types = ql.INT8S
    formal_inputs = ("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0,
                                  "kernel_shape": None, "pads": None, "strides": None, "channels_last": 0})
        for name in ("pads", "strides"):
            if node.attrs[name] is None:
                del node.attrs[name]
        if node.attrs["channels_last"]:
            raise UnsupportedError(f"{node.label}: channels_last=1 (onnxc pools NCHW)")
        ql.check_unary(node, ctx)
        return super().infer(node, ctx)

    def reduction(self, node: Node, x) -> dict:
        return {"init": "0.0f", "step": "acc += v;", "result": "acc / (float)count"}

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        kernel = super().lower(node, k)
        kernel.data["ct"] = "float"
        kernel.data["load"] = f"onnxc_mul_rn((float)((int32_t)xp[i] - {ql.zero(k, 2)}), {ql.scale(k, 1)})"
        kernel.data["store"] = ql.saturate(f"rintf((acc / (float)count) / {ql.scale(k, 3)}) + (float){ql.zero(k, 4)}",
                                           k.out)
        kernel.helpers.append(ql.HELPER)
        return kernel
