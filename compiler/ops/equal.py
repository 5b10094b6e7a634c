from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("Equal", since=1)
class Equal(Comparison):
    """C = (A == B), broadcasting."""
    types = dt.NUMERIC + (dt.BOOL, dt.STRING)
    operator = "=="

    def scalar(self, a, b, node, t):
        if t.dtype is dt.STRING:
            return f"strcmp({a}, {b}) == 0"
        return super().scalar(a, b, node, t)
