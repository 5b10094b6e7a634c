from ._unary import MathUnary
from .registry import register


@register("Sqrt", since=1)
class Sqrt(MathUnary):
    """Y = sqrt(X)."""
    func = "sqrt"
