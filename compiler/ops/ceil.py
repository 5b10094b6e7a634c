from ._unary import MathUnary
from .registry import register


@register("Ceil", since=1)
class Ceil(MathUnary):
    """Y = ceil(X)."""
    func = "ceil"
