from .reduce_sum import ReduceSum
from .registry import register


@register("ReduceMean", since=1)
class ReduceMean(ReduceSum):
    """reduced = mean of data over axes (integers: truncated sum / count, 0 when empty)."""

    def finish(self, acc, count, t):
        if t.dtype.is_float:
            return f"{acc} / ({t.compute}){count}"
        if count == "0":
            return "0"
        if count.isdigit():
            return f"{acc} / {count}"
        return f"({count} > 0 ? {acc} / {count} : 0)"
