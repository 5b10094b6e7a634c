from ._unary import MathUnary
from .registry import register


@register("Asin", since=7)
class Asin(MathUnary):
    """Y = asin(X)."""
    func = "asin"
