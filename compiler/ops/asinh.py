from ._unary import MathUnary
from .registry import register


@register("Asinh", since=9)
class Asinh(MathUnary):
    """Y = asinh(X)."""
    func = "asinh"
