from ...codegen.cexpr import math_fn
from .. import dtypes as dt
from ._elementwise import Unary
from ._unary import wrapping_neg
from .registry import register


@register("Abs", since=1)
class Abs(Unary):
    """Y = |X|; abs of the most negative signed integer wraps to itself, as in numpy."""
    types = dt.NUMERIC

    def scalar(self, x, node, t):
        if t.dtype.is_float:
            return f"{math_fn('fabs', t.compute)}({x})"
        if t.dtype.kind == "uint":
            return x
        return f"({x} < 0 ? {wrapping_neg(x, t)} : {x})"
