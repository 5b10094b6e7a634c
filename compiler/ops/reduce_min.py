from .. import dtypes as dt
from ._reduce import REDUCE_TYPES, Reduce, highest
from .registry import register


@register("ReduceMin", since=1)
class ReduceMin(Reduce):
    """reduced = min of data over axes (NaN wins; empty: highest value)."""
    types = REDUCE_TYPES + (dt.INT8, dt.UINT8, dt.BOOL)

    def init(self, t):
        return highest(t.dtype)

    def combine(self, acc, x, t):
        if t.dtype is dt.BOOL:
            return f"{acc} & {x}"
        if t.dtype.is_float:
            return f"({x} < {acc} || {x} != {x}) ? {x} : {acc}"
        return f"{x} < {acc} ? {x} : {acc}"
