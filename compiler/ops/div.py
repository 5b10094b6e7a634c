from .. import dtypes as dt
from ._binary import Broadcasting, nonzero_divisor_kernel
from ._dims_value import arithmetic
from .registry import register


def _divide_dims(ctx, a, b):
    """Integer division of shape data: C truncation for known values, floor (the same for sizes) otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ctx.fail("division by zero in shape data")
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return ctx.dims.floordiv(a, b)


@register("Div", since=1)
class Div(Broadcasting):
    """C = A / B, broadcasting; integers truncate toward zero and fail on a zero divisor."""
    dims_value = staticmethod(arithmetic(_divide_dims))

    types = dt.NUMERIC

    def scalar(self, a, b, node, t):
        d = t.dtype
        if d.kind == "int" and d.itemsize >= 4:  # INT_MIN / -1 overflows: it wraps to INT_MIN
            return f"({b} == -1 ? ({d.c_type})((u{d.c_type})0 - (u{d.c_type}){a}) : {a} / {b})"
        return f"{a} / {b}"

    def lower(self, node, k):
        a, b = self.operands(node, k)
        return nonzero_divisor_kernel(k, [a, b], lambda v: self.scalar(v[0], v[1], node, a), b,
                                      "Div: integer division by zero")

