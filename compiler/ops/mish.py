from ...codegen.cexpr import math_fn
from ._unary import FloatUnary, softplus
from .registry import register


@register("Mish", since=18)
class Mish(FloatUnary):
    """Y = X * tanh(softplus(X))."""

    def scalar(self, x, node, t):
        return f"{x} * {math_fn('tanh', t.compute)}({softplus(x, t.compute)})"
