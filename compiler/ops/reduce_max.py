from .. import dtypes as dt
from ._reduce import REDUCE_TYPES, Reduce, lowest
from .registry import register


@register("ReduceMax", since=1)
class ReduceMax(Reduce):
    """reduced = max of data over axes (NaN wins; empty: lowest value)."""
    types = REDUCE_TYPES + (dt.INT8, dt.UINT8, dt.BOOL)

    def init(self, t):
        return lowest(t.dtype)

    def combine(self, acc, x, t):
        if t.dtype is dt.BOOL:
            return f"{acc} | {x}"
        if t.dtype.is_float:
            return f"({x} > {acc} || {x} != {x}) ? {x} : {acc}"
        return f"{x} > {acc} ? {x} : {acc}"
