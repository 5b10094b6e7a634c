from ...codegen import cexpr
from .. import dtypes as dt
from ..ir import Node
from .registry import OpDef, register


def dim_range(node: Node, rank: int) -> range:
    """The axes ``start:end`` selects (negative from the back, clamped like a slice)."""
    def clamp(i: int) -> int:
        return min(max(i + rank if i < 0 else i, 0), rank)
    start = clamp(node.attrs.get("start", 0))
    end = clamp(node.attrs.get("end", rank))
    return range(start, max(start, end))


@register("Shape", since=1)
class Shape(OpDef):
    """shape = the input's dims (axes start:end from opset 15) as int64."""

    def infer(self, node, ctx):
        shape = ctx.inp(0).shape
        axes = dim_range(node, len(shape))
        ctx.set_sym_value(0, [shape[i] for i in axes])
        return [(dt.INT64, (len(axes),))]

    def lower(self, node, k):
        x = k.input(0)
        values = [cexpr.lit(x.dims[i]) for i in dim_range(node, x.rank)]
        return k.kernel("c/shape.c.j2", output=k.out.name, values=values)
