from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("LeakyRelu", since=1)
class LeakyRelu(FloatUnary):
    """Y = X for X >= 0, alpha * X otherwise."""

    def scalar(self, x, node, t):
        alpha = float_literal(node.attrs["alpha"], t.compute)
        return f"({x} >= 0 ? {x} : {alpha} * {x})"
