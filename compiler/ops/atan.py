from ._unary import MathUnary
from .registry import register


@register("Atan", since=7)
class Atan(MathUnary):
    """Y = atan(X)."""
    func = "atan"
