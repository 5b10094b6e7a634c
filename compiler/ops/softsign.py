from ...codegen.cexpr import math_fn
from ._unary import FloatUnary
from .registry import register


@register("Softsign", since=1)
class Softsign(FloatUnary):
    """Y = X / (1 + |X|)."""

    def scalar(self, x, node, t):
        return f"{x} / (1 + {math_fn('fabs', t.compute)}({x}))"
