from ...codegen.cexpr import math_fn
from .. import dtypes as dt
from ._reduce import Reduce
from .registry import register


@register("ReduceLogSum", since=1)
class ReduceLogSum(Reduce):
    """reduced = log(sum of data over axes); empty: -inf."""
    types = dt.FLOATS

    def init(self, t):
        return "0"

    def combine(self, acc, x, t):
        return f"{acc} + {x}"

    def finish(self, acc, count, t):
        return f"{math_fn('log', t.compute)}({acc})"
