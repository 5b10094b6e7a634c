from ._reduce import Reduce, unsigned, wrap
from .registry import register


@register("ReduceMean", since=1)
class ReduceMean(Reduce):
    """reduced = mean of data over axes (integers: truncated sum / count, 0 when empty)."""

    def init(self, t):
        return "0"

    def combine(self, acc, x, t):
        if t.dtype.is_float:
            return f"{acc} + {x}"
        u = unsigned(t.dtype)
        return wrap(t.dtype, f"({u}){acc} + ({u}){x}")

    def finish(self, acc, count, t):
        if t.dtype.is_float:
            return f"{acc} / ({t.compute}){count}"
        if count == "0":
            return "0"
        if count.isdigit():
            return f"{acc} / {count}"
        return f"({count} > 0 ? {acc} / {count} : 0)"
