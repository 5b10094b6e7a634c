from ._reduce import Reduce, unsigned, wrap
from .registry import register


@register("ReduceProd", since=1)
class ReduceProd(Reduce):
    """reduced = product of data over axes (integers wrap around)."""

    def init(self, t):
        return "1"

    def combine(self, acc, x, t):
        if t.dtype.is_float:
            return f"{acc} * {x}"
        u = unsigned(t.dtype)
        return wrap(t.dtype, f"({u}){acc} * ({u}){x}")
