from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("Not", since=1)
class Not(Unary):
    """Y = logical not X."""
    types = (dt.BOOL,)

    def scalar(self, x, node, t):
        return f"!{x}"
