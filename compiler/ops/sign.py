from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("Sign", since=9)
class Sign(Unary):
    """Y = 1, -1 or 0 by the sign of X (NaN stays NaN)."""
    types = dt.NUMERIC

    def scalar(self, x, node, t):
        if t.dtype.kind == "uint":
            return f"({x} != 0)"
        return f"({x} > 0 ? 1 : ({x} < 0 ? -1 : {x}))"
