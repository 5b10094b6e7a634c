from .. import dtypes as dt
from ._binary import Broadcasting, wrapping
from ._dims_value import arithmetic
from .registry import register


@register("Add", since=1)
class Add(Broadcasting):
    """C = A + B, broadcasting."""
    dims_value = staticmethod(arithmetic(lambda ctx, a, b: ctx.dims.add(a, b)))

    types = dt.NUMERIC

    def scalar(self, a, b, node, t):
        return wrapping("+", a, b, t.dtype)
