"""com.microsoft QLinearConcat: onnxruntime's quantized Concat, every input requantized to the
output's scale and zero point."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("QLinearConcat", since=1, domain=ql.MS)
class QLinearConcat(OpDef):
    """Y = concat(quantize(dequantize(X_i)), axis), inputs Y_scale, Y_zero_point, then
    (X_i, X_i_scale, X_i_zero_point) for each input; requantization as onnxruntime's table does."""
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"axis": None})
        if node.attrs["axis"] is None:
            raise ctx.fail("required attribute 'axis' is missing")
        if len(node.inputs) < 5 or (len(node.inputs) - 2) % 3:
            raise ctx.fail(f"{len(node.inputs)} inputs: expects Y_scale, Y_zero_point, then triples")
        y_zero = ctx.inp(1)
        if y_zero.dtype not in ql.INT8S:
            raise ctx.fail(f"Y_zero_point type {y_zero.dtype} is not int8 or uint8")
        ql.one_value(ctx, 0, dt.FLOAT, "Y_scale")
        ql.one_value(ctx, 1, y_zero.dtype, "Y_zero_point")
        xs = [ctx.inp(i) for i in range(2, len(node.inputs), 3)]
        rank = len(xs[0].shape)
        axis = node.attrs["axis"]
        if not -rank <= axis < rank:
            raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        for j, x in enumerate(xs):
            i = 2 + 3 * j
            if x.dtype != y_zero.dtype:
                raise UnsupportedError(f"{node.label}: input {i} of type {x.dtype} (onnxc takes "
                                          f"{y_zero.dtype} inputs like Y)")
            ql.one_value(ctx, i + 1, dt.FLOAT, f"input {i + 1}")
            ql.one_value(ctx, i + 2, x.dtype, f"input {i + 2}")
            if len(x.shape) != rank:
                raise ctx.fail(f"input {i} has rank {len(x.shape)}, input 2 has {rank}")
            for a, (d0, d) in enumerate(zip(xs[0].shape, x.shape)):
                if a != axis:
                    ctx.dims.same(d0, d)
        total = xs[0].shape[axis]
        for x in xs[1:]:
            total = ctx.dims.add(total, x.shape[axis])
        return [(y_zero.dtype, (*xs[0].shape[:axis], total, *xs[0].shape[axis + 1:]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        y = k.out
        axis = node.attrs["axis"] % y.rank
        parts = []
        for i in range(2, len(node.inputs), 3):
            x = k.input(i)
            quantized = ql.saturate(f"rintf(x / {ql.scale(k, 0)}) + (float){ql.zero(k, 1)}", y)
            parts.append({"x": x.name, "scale": ql.scale(k, i + 1), "zero": ql.zero(k, i + 2),
                          "quantized": quantized, "inner": cexpr.lit(cexpr.prod(x.dims[axis:]))})
        return k.kernel("c/qlinear_concat.c.j2", helpers=(ql.HELPER,), ctype=y.ctype, parts=parts, y=y.name,
                        outer=cexpr.lit(cexpr.prod(y.dims[:axis])), row=cexpr.lit(cexpr.prod(y.dims[axis:])))
