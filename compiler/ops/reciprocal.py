from ._unary import FloatUnary
from .registry import register


@register("Reciprocal", since=1)
class Reciprocal(FloatUnary):
    """Y = 1 / X."""

    def scalar(self, x, node, t):
        return f"1 / {x}"
