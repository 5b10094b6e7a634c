from ...codegen.cexpr import math_fn
from ._reduce import Reduce, saturate_to_int
from .registry import register


@register("ReduceL2", since=1)
class ReduceL2(Reduce):
    """reduced = sqrt(sum of data^2 over axes); integers accumulate in double."""

    def acc_type(self, t):
        return t.compute if t.dtype.is_float else "double"

    def init(self, t):
        return "0"

    def combine(self, acc, x, t):
        if t.dtype.is_float:
            return f"{acc} + {x} * {x}"
        return f"{acc} + (double){x} * (double){x}"

    def finish(self, acc, count, t):
        if t.dtype.is_float:
            return f"{math_fn('sqrt', t.compute)}({acc})"
        return saturate_to_int(f"sqrt({acc})", t.dtype)
