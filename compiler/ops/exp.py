from ._unary import MathUnary
from .registry import register


@register("Exp", since=1)
class Exp(MathUnary):
    """Y = exp(X)."""
    func = "exp"
