from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("LessOrEqual", since=12)
class LessOrEqual(Comparison):
    """C = (A <= B), broadcasting."""
    types = dt.NUMERIC
    operator = "<="
