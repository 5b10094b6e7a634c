from ...codegen.cexpr import math_fn
from .. import dtypes as dt
from ._reduce import Reduce, ReduceBody, accumulate, plan_for
from .registry import register


@register("ReduceLogSumExp", since=1)
class ReduceLogSumExp(Reduce):
    """reduced = log(sum of exp(data) over axes), shifted by the finite max for stability."""
    types = dt.FLOATS

    def lower(self, node, k):
        x, y = k.input(0), k.out
        c = x.compute
        body = ReduceBody(plan_for(node, k, x, y.numel), y)
        shift = body.buffer("shift", c)
        body.init(shift, "-INFINITY")
        body.add(accumulate(body.plan, shift, c, f"const {c} x = {x.load('i')};", "x > {a} ? x : {a}"))
        # An infinite max would turn exp(x - max) into NaN: shift by 0 instead.
        body.add_outputs([f"if (!isfinite({shift}[o]))", f"    {shift}[o] = 0;"])
        total = body.accumulator("sum", c)
        body.init(total, "0")
        body.add(accumulate(body.plan, total, c,
                            f"const {c} x = {math_fn('exp', c)}({x.load('i')} - {shift}[o]);", "{a} + x"))
        log = math_fn("log", c)
        body.final = f"{y.name}[o] = {y.store(f'{log}({total}[o]) + {shift}[o]')};"
        kernel = body.kernel(k)
        self.attach_shape(node, k, kernel)
        return kernel
