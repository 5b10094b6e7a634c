from ._unary import MathUnary
from .registry import register


@register("Tanh", since=1)
class Tanh(MathUnary):
    """Y = tanh(X)."""
    func = "tanh"
