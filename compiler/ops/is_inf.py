from .. import dtypes as dt
from ._unary import FloatUnary
from .registry import register


@register("IsInf", since=10)
class IsInf(FloatUnary):
    """Y = whether X is +inf (if detect_positive) or -inf (if detect_negative)."""

    def out_dtype(self, x):
        return dt.BOOL

    def scalar(self, x, node, t):
        positive, negative = node.attrs["detect_positive"], node.attrs["detect_negative"]
        if positive and negative:
            return f"({x} == INFINITY || {x} == -INFINITY)"
        if positive:
            return f"({x} == INFINITY)"
        if negative:
            return f"({x} == -INFINITY)"
        return f"((void){x}, 0)"
