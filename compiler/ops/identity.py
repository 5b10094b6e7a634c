from ._copy import Copy
from ._dims_value import passthrough
from .registry import register


@register("Identity", since=1)
class Identity(Copy):
    """output = input."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        return [(x.dtype, x.shape)]
