from ._unary import FloatUnary, sigmoid
from .registry import register


@register("Sigmoid", since=1)
class Sigmoid(FloatUnary):
    """Y = 1 / (1 + exp(-X))."""

    def scalar(self, x, node, t):
        return sigmoid(x, t.compute)
