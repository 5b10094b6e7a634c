from .. import dtypes as dt
from ._binary import Folding
from .registry import register


@register("Sum", since=1)
class Sum(Folding):
    """Sum of the inputs, elementwise."""
    types = dt.FLOATS

    def combine(self, acc, x, t):
        return f"{acc} + {x}"
