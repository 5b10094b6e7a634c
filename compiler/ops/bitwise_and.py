from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("BitwiseAnd", since=18)
class BitwiseAnd(Broadcasting):
    """C = A & B (bits), broadcasting."""
    types = dt.INTS

    def scalar(self, a, b, node, t):
        return f"{a} & {b}"
