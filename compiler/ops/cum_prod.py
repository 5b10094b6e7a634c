from ._cumulative import Cumulative
from .registry import register


@register("CumProd", since=26)
class CumProd(Cumulative):
    """y = running product of x along axis (exclusive, reverse; integers wrap around)."""
    op = "*"
    identity = "1"
