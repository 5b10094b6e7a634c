from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("Greater", since=1)
class Greater(Comparison):
    """C = (A > B), broadcasting."""
    types = dt.NUMERIC
    operator = ">"
