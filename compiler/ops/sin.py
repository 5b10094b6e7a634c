from ._unary import MathUnary
from .registry import register


@register("Sin", since=7)
class Sin(MathUnary):
    """Y = sin(X)."""
    func = "sin"
