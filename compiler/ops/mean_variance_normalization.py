from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ._reduce import ReduceBody, accumulate, check_type, mapping, static_axes, static_plan
from .registry import OpDef, register


@register("MeanVarianceNormalization", since=9)
class MeanVarianceNormalization(OpDef):
    """Y = (X - mean) / (sqrt(var) + 1e-9) with mean and variance over axes."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, dt.FLOATS)
        static_axes(ctx, node.attrs.get("axes", (0, 2, 3)), len(x.shape))
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        c = x.compute
        axes = sorted(a % x.rank for a in node.attrs.get("axes", (0, 2, 3)))
        plan = static_plan(x.dims, axes)
        body = ReduceBody(plan, y)
        mean, scale = body.buffer("mean", c), body.buffer("inv_std", c)
        count = f"({c}){body.count}"
        body.init(mean, "0")
        body.init(scale, "0")
        body.add(accumulate(plan, mean, c, f"const {c} x = {x.load('i')};", "{a} + x"))
        body.add_outputs([f"{mean}[o] /= {count};"])
        body.add(accumulate(plan, scale, c, f"const {c} x = {x.load('i')} - {mean}[o];", "{a} + x * x"))
        body.add_outputs([f"{scale}[o] = 1 / ({math_fn('sqrt', c)}({scale}[o] / {count}) + {float_literal(1e-9, c)});"])
        normalized = f"({x.load('i')} - {mean}[o]) * {scale}[o]"
        body.add(mapping([f"{y.name}[i] = {y.store(normalized)};"]))
        return body.kernel(k)
