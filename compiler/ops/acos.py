from ._unary import MathUnary
from .registry import register


@register("Acos", since=7)
class Acos(MathUnary):
    """Y = acos(X)."""
    func = "acos"
