from .. import dtypes as dt
from ._binary import Folding, extremum
from .registry import register


@register("Max", since=1)
class Max(Folding):
    """Largest of the inputs, elementwise; NaN propagates."""
    types = dt.NUMERIC

    def combine(self, acc, x, t):
        return extremum("max", acc, x, t.dtype)

    def lower(self, node, k):
        kernel = super().lower(node, k)
        kernel.helpers.append("c/helpers/minmax.c.j2")
        return kernel
