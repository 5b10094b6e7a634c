from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("GreaterOrEqual", since=12)
class GreaterOrEqual(Comparison):
    """C = (A >= B), broadcasting."""
    types = dt.NUMERIC
    operator = ">="
