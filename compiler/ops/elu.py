from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("Elu", since=1)
class Elu(FloatUnary):
    """Y = X for X >= 0, alpha * (exp(X) - 1) otherwise."""

    def scalar(self, x, node, t):
        alpha = float_literal(node.attrs["alpha"], t.compute)
        return f"({x} >= 0 ? {x} : {alpha} * {math_fn('expm1', t.compute)}({x}))"
