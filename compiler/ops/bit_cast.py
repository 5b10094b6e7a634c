import ml_dtypes

from .. import dtypes as dt
from ._copy import Copy
from .registry import register


@register("BitCast", since=26)
class BitCast(Copy):
    """output = the input's bytes reinterpreted as the element type ``to`` (same bit width)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if "to" not in node.attrs:
            raise ctx.fail("the to attribute is required")
        to = dt.from_onnx(node.attrs["to"])
        if _bits(to) != _bits(x.dtype) or to.kind == "string" or x.dtype.kind == "string":
            raise ctx.fail(f"cannot bit-cast {x.dtype} to {to}: the element widths differ")
        return [(to, x.shape)]


def _bits(t: dt.DType) -> int:
    """Bit width of an element (sub-byte types are stored one per byte but are narrower)."""
    for info in (ml_dtypes.iinfo, ml_dtypes.finfo):
        try:
            return int(info(t.np).bits)
        except (TypeError, ValueError):
            pass
    return 8 * t.itemsize
