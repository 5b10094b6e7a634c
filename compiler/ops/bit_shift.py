from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("BitShift", since=11)
class BitShift(Broadcasting):
    """Z = X << Y or X >> Y (direction), broadcasting; right shifts of signed X are arithmetic.
    Shift amounts below 0 or of the bit width and more shift every bit out."""
    types = dt.INTS

    def infer(self, node, ctx):
        if node.attrs.get("direction") not in ("LEFT", "RIGHT"):
            raise ctx.fail(f"direction must be LEFT or RIGHT, not {node.attrs.get('direction')!r}")
        return super().infer(node, ctx)

    def scalar(self, x, y, node, t):
        d = t.dtype
        bits = 8 * d.itemsize
        signed = d.kind == "int"
        outside = f"({y} < 0 || {y} >= {bits})" if signed else f"{y} >= {bits}"
        if node.attrs["direction"] == "LEFT":
            unsigned = f"u{d.c_type}" if signed else d.c_type
            wide = "uint64_t" if bits == 64 else "uint32_t"  # no promotion to (signed) int
            return f"{outside} ? 0 : ({d.c_type})(({wide})({unsigned}){x} << {y})"
        if not signed:
            return f"{outside} ? 0 : {x} >> {y}"
        # Right shift of a negative value is implementation-defined in C: shift its complement.
        amount = f"({outside} ? {bits - 1} : {y})"
        return f"{x} < 0 ? ({d.c_type})~(~{x} >> {amount}) : ({d.c_type})({x} >> {amount})"
