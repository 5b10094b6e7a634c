from ._copy import Copy
from ._dims_value import passthrough
from .registry import register


@register("Identity", since=1)
class Identity(Copy):
    """output = input."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        return [(x.dtype, x.shape, x.kind)]

    def inline(self, node):
        x = node.inputs[0] if node.inputs else None
        if x is not None and not x.is_tensor:
            return [], [x]  # a sequence or optional: readers use it directly (nothing edits it)
        return None
