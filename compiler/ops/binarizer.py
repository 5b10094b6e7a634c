from ...codegen.literals import float_literal
from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("Binarizer", since=1, domain="ai.onnx.ml")
class Binarizer(Unary):
    """Y = 1 where X > threshold, else 0 (same type as X)."""
    types = (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.INT32)

    def scalar(self, x, node, t):
        threshold = node.attrs.get("threshold", 0.0)
        bound = float_literal(threshold, "double") if t.dtype.is_int else float_literal(threshold, t.compute)
        return f"({x} > {bound} ? 1 : 0)"
