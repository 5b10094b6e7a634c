from .. import dtypes as dt
from ._unary import FloatUnary
from .registry import register


@register("IsNaN", since=9)
class IsNaN(FloatUnary):
    """Y = whether X is NaN."""

    def out_dtype(self, x):
        return dt.BOOL

    def scalar(self, x, node, t):
        return f"({x} != {x})"
