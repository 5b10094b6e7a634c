from ._unary import MathUnary
from .registry import register


@register("Erf", since=9)
class Erf(MathUnary):
    """Y = erf(X)."""
    func = "erf"
