from ._copy import Copy
from ._dims_value import passthrough
from .registry import register


@register("Flatten", since=1)
class Flatten(Copy):
    """Y = X as a 2-D matrix (product of dims before axis, product of the rest)."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        rank = len(x.shape)
        axis = node.attrs.get("axis", 1)
        if not -rank <= axis <= rank:
            raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
        if axis < 0:
            axis += rank
        return [(x.dtype, (ctx.dims.product(x.shape[:axis]), ctx.dims.product(x.shape[axis:])))]
