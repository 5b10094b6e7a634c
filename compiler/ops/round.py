from ._unary import MathUnary
from .registry import register


@register("Round", since=11)
class Round(MathUnary):
    """Y = X rounded to the nearest integer, halves to even (the default rounding mode)."""
    func = "nearbyint"
