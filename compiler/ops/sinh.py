from ._unary import MathUnary
from .registry import register


@register("Sinh", since=9)
class Sinh(MathUnary):
    """Y = sinh(X)."""
    func = "sinh"
