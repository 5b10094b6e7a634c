from ._unary import MathUnary
from .registry import register


@register("Tan", since=7)
class Tan(MathUnary):
    """Y = tan(X)."""
    func = "tan"
