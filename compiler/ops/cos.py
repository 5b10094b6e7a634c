from ._unary import MathUnary
from .registry import register


@register("Cos", since=7)
class Cos(MathUnary):
    """Y = cos(X)."""
    func = "cos"
