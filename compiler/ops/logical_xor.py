from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("Xor", since=1)
class Xor(Broadcasting):
    """C = A xor B, broadcasting."""
    types = (dt.BOOL,)

    def scalar(self, a, b, node, t):
        return f"!{a} != !{b}"
