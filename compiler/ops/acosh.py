from ._unary import MathUnary
from .registry import register


@register("Acosh", since=9)
class Acosh(MathUnary):
    """Y = acosh(X)."""
    func = "acosh"
