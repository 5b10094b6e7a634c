from .. import dtypes as dt
from ._elementwise import Unary
from ._unary import wrapping_neg
from .registry import register


@register("Neg", since=1)
class Neg(Unary):
    """Y = -X; the most negative signed integer wraps to itself, as in numpy."""
    types = dt.FLOATS + dt.SIGNED_INTS

    def scalar(self, x, node, t):
        return wrapping_neg(x, t)
