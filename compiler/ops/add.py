from .. import dtypes as dt
from ._elementwise import Binary
from .registry import register


@register("Add", since=1)
class Add(Binary):
    """C = A + B, broadcasting."""
    types = dt.NUMERIC

    def scalar(self, a, b, node, t):
        return f"{a} + {b}"
