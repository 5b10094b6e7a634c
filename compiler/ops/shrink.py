from ...codegen.literals import float_literal
from .. import dtypes as dt
from ._elementwise import Unary
from .registry import register


@register("Shrink", since=9)
class Shrink(Unary):
    """Y = X + bias for X < -lambd, X - bias for X > lambd, 0 otherwise."""
    types = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16) + dt.INTS

    def scalar(self, x, node, t):
        lambd, bias = node.attrs["lambd"], node.attrs["bias"]
        # Integers: the arithmetic is done in double, then converted back saturating.
        c = t.compute if t.dtype.is_float else "double"
        low, high = f"{x} + {float_literal(bias, c)}", f"{x} - {float_literal(bias, c)}"
        if not t.dtype.is_float:
            low, high = (f"onnxc_sat_double_to_{t.dtype.name}({e})" for e in (low, high))
        return f"({x} < {float_literal(-lambd, c)} ? {low} : ({x} > {float_literal(lambd, c)} ? {high} : 0))"

    def lower(self, node, k):
        kernel = super().lower(node, k)
        if not k.input(0).dtype.is_float:
            kernel.helpers.append("c/helpers/sat_double_to_int.c.j2")
        return kernel
