from ...codegen.literals import float_literal
from ._unary import FloatUnary, sigmoid
from .registry import register


@register("Swish", since=24)
class Swish(FloatUnary):
    """Y = X * sigmoid(alpha * X)."""

    def scalar(self, x, node, t):
        alpha = float_literal(node.attrs["alpha"], t.compute)
        return f"{x} * {sigmoid(f'({alpha} * {x})', t.compute)}"
