"""com.microsoft QLinearSoftmax: onnxruntime's quantized Softmax, through its table of exponentials."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("QLinearSoftmax", since=1, domain=ql.MS)
class QLinearSoftmax(OpDef):
    """Softmax of the quantized X along axis (from axis on, flattened, when the opset attribute
    is below 13), quantized with y_scale and y_zero_point; x_zero_point cancels out."""
    formal_inputs = ("X", "X_scale", "x_zero_point", "y_scale", "y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"opset": None, "axis": None})
        if node.attrs["opset"] is None:
            raise ctx.fail("required attribute 'opset' is missing")
        if node.attrs["axis"] is None:
            node.attrs["axis"] = 1 if node.attrs["opset"] < 13 else -1
        out = ql.check_unary(node, ctx)
        rank = len(ctx.inp(0).shape)
        if not -rank <= node.attrs["axis"] < max(rank, 1):
            raise ctx.fail(f"axis {node.attrs['axis']} is out of range for rank {rank}")
        return out

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        axis = node.attrs["axis"] % max(x.rank, 1)
        flat = node.attrs["opset"] < 13
        d = cexpr.prod(x.dims[axis:]) if flat else x.dims[axis]
        inner = 1 if flat else cexpr.prod(x.dims[axis + 1:])
        store = ql.saturate(f"rintf((e * inverse_scale) / sum) + (float){ql.zero(k, 4)}", y)
        return k.kernel("c/qlinear_softmax.c.j2", helpers=(ql.HELPER,), x=x.name, y=y.name,
                        OUTER=cexpr.lit(cexpr.prod(x.dims[:axis])), D=cexpr.lit(d), INNER=cexpr.lit(inner),
                        x_scale=ql.scale(k, 1), y_scale=ql.scale(k, 3), store=store)
