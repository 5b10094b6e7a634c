from ._cumulative import Cumulative
from .registry import register


@register("CumSum", since=11)
class CumSum(Cumulative):
    """y = running sum of x along axis (exclusive, reverse; integers wrap around)."""
    op = "+"
    identity = "0"
