from ._unary import MathUnary
from .registry import register


@register("Floor", since=1)
class Floor(MathUnary):
    """Y = floor(X)."""
    func = "floor"
