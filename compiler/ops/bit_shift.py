from .. import dtypes as dt
from ._binary import Broadcasting
from .registry import register


@register("BitShift", since=11)
class BitShift(Broadcasting):
    """Z = X << Y or X >> Y (direction), broadcasting; right shifts of a signed X are arithmetic.
    Shifting by less than 0 or by the bit width or more shifts every bit out."""
    types = dt.INTS

    def infer(self, node, ctx):
        if node.attrs.get("direction") not in ("LEFT", "RIGHT"):
            raise ctx.fail(f"direction must be LEFT or RIGHT, not {node.attrs.get('direction')!r}")
        return super().infer(node, ctx)

    def scalar(self, x, y, node, t):
        d = t.dtype
        bits = 8 * d.itemsize
        signed = d.kind == "int"
        if node.attrs["direction"] == "RIGHT" and signed:
            return f"({d.c_type})onnxc_shift_right_signed({x}, {y}, {bits})"
        outside = f"{y} < 0 || {y} >= {bits}" if signed else f"{y} >= {bits}"
        if node.attrs["direction"] == "RIGHT":
            return f"{outside} ? 0 : {x} >> {y}"
        # Shift unsigned bits, at least 32 wide so that no promotion to int can overflow.
        wide = "uint64_t" if bits == 64 else "uint32_t"
        bits_of_x = f"({wide})(u{d.c_type}){x}" if signed else f"({wide}){x}"
        return f"{outside} ? 0 : ({d.c_type})({bits_of_x} << {y})"

    def lower(self, node, k):
        kernel = super().lower(node, k)
        if node.attrs["direction"] == "RIGHT" and k.input(0).dtype.kind == "int":
            kernel.helpers.append("c/helpers/bit_shift.c.j2")
        return kernel
