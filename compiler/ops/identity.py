from ._copy import Copy
from .registry import register


@register("Identity", since=1)
class Identity(Copy):
    """output = input."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        return [(x.dtype, x.shape)]
