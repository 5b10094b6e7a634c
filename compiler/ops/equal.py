from .. import dtypes as dt
from ._binary import Comparison
from .registry import register


@register("Equal", since=1)
class Equal(Comparison):
    """C = (A == B), broadcasting."""
    types = dt.NUMERIC + (dt.BOOL,)
    operator = "=="
