from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("Celu", since=12)
class Celu(FloatUnary):
    """Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))."""

    def scalar(self, x, node, t):
        # For any alpha != 0 the first term is the result when X > 0 and the second otherwise.
        alpha = float_literal(node.attrs["alpha"], t.compute)
        return f"({x} > 0 ? {x} : {alpha} * {math_fn('expm1', t.compute)}({x} / {alpha}))"
