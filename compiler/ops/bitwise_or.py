from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("BitwiseOr", since=18)
class BitwiseOr(Broadcasting):
    """C = A | B (bits), broadcasting."""
    types = dt.INTS

    def scalar(self, a, b, node, t):
        return f"{a} | {b}"
