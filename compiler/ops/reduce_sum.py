from ._reduce import Reduce, unsigned, wrap
from .registry import register


@register("ReduceSum", since=1)
class ReduceSum(Reduce):
    """reduced = sum of data over axes (integers wrap around)."""

    def init(self, t):
        return "0"

    def combine(self, acc, x, t):
        if t.dtype.is_float:
            return f"{acc} + {x}"
        u = unsigned(t.dtype)
        return wrap(t.dtype, f"({u}){acc} + ({u}){x}")
