from .. import dtypes as dt
from ._binary import Folding, extremum
from .registry import register


@register("Min", since=1)
class Min(Folding):
    """Smallest of the inputs, elementwise; NaN propagates."""
    types = dt.NUMERIC

    def combine(self, acc, x, t):
        return extremum("min", acc, x, t.dtype)

    def lower(self, node, k):
        kernel = super().lower(node, k)
        kernel.helpers.append("c/helpers/minmax.c.j2")
        return kernel
