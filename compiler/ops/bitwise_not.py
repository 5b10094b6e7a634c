from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("BitwiseNot", since=18)
class BitwiseNot(Unary):
    """Y = ~X."""
    types = dt.INTS

    def scalar(self, x, node, t):
        return f"({t.ctype})~{x}"
