from ._unary import MathUnary
from .registry import register


@register("Cosh", since=9)
class Cosh(MathUnary):
    """Y = cosh(X)."""
    func = "cosh"
