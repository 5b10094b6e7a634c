from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("Relu", since=1)
class Relu(Unary):
    """Y = max(X, 0); NaN stays NaN (as in onnxruntime and numpy)."""
    types = dt.FLOATS + dt.SIGNED_INTS

    def scalar(self, x, node, t):
        return f"({x} < 0 ? 0 : {x})"
