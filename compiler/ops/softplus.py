from ._unary import FloatUnary, softplus
from .registry import register


@register("Softplus", since=1)
class Softplus(FloatUnary):
    """Y = log(exp(X) + 1)."""

    def scalar(self, x, node, t):
        return softplus(x, t.compute)
