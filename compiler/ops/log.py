from ._unary import MathUnary
from .registry import register


@register("Log", since=1)
class Log(MathUnary):
    """Y = log(X)."""
    func = "log"
