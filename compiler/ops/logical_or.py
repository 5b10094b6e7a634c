from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("Or", since=1)
class Or(Broadcasting):
    """C = A or B, broadcasting."""
    types = (dt.BOOL,)

    def scalar(self, a, b, node, t):
        return f"{a} || {b}"
