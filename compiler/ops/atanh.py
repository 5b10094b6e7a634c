from ._unary import MathUnary
from .registry import register


@register("Atanh", since=9)
class Atanh(MathUnary):
    """Y = atanh(X)."""
    func = "atanh"
