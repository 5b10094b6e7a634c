from ...codegen.cexpr import math_fn
from ._reduce import Reduce, unsigned, wrap
from .registry import register


@register("ReduceL1", since=1)
class ReduceL1(Reduce):
    """reduced = sum of |data| over axes."""

    def init(self, t):
        return "0"

    def combine(self, acc, x, t):
        if t.dtype.is_float:
            return f"{acc} + {math_fn('fabs', t.compute)}({x})"
        if t.dtype.kind == "uint":
            return f"{acc} + {x}"
        u = unsigned(t.dtype)
        return wrap(t.dtype, f"({u}){acc} + ({x} < 0 ? ({u})0 - ({u}){x} : ({u}){x})")
