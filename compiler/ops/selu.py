from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("Selu", since=1)
class Selu(FloatUnary):
    """Y = gamma * X for X > 0, gamma * (alpha * exp(X) - alpha) otherwise."""

    def scalar(self, x, node, t):
        alpha, gamma = (float_literal(node.attrs[a], t.compute) for a in ("alpha", "gamma"))
        exp = math_fn("exp", t.compute)
        return f"({x} > 0 ? {gamma} * {x} : {gamma} * ({alpha} * {exp}({x}) - {alpha}))"
