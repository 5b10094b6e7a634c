from .. import dtypes as dt
from ..dims import broadcast_shapes
from ._elementwise import check_dtype, elementwise_kernel
from .registry import OpDef, register


@register("Where", since=9)
class Where(OpDef):
    """output = condition ? X : Y, broadcasting all three."""

    def infer(self, node, ctx):
        cond, x, y = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        check_dtype(ctx, cond.dtype, (dt.BOOL,), "condition")
        if x.dtype != y.dtype:
            raise ctx.fail(f"X and Y types differ: {x.dtype} and {y.dtype}")
        return [(x.dtype, broadcast_shapes(ctx.dims, cond.shape, x.shape, y.shape))]

    def lower(self, node, k):
        return elementwise_kernel(k, [k.input(0), k.input(1), k.input(2)], lambda v: f"{v[0]} ? {v[1]} : {v[2]}")
