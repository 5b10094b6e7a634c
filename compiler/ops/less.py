from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("Less", since=1)
class Less(Comparison):
    """C = (A < B), broadcasting."""
    types = dt.NUMERIC
    operator = "<"
