from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("And", since=1)
class And(Broadcasting):
    """C = A and B, broadcasting."""
    types = (dt.BOOL,)

    def scalar(self, a, b, node, t):
        return f"{a} && {b}"
