from ...codegen.literals import float_literal
from .. import dtypes as dt
from ._elementwise import Unary, check_dtype, elementwise_kernel
from ._unary import FloatUnary, clamp
from .registry import register


@register("Clip", since=1, until=10)
class Clip1(FloatUnary):
    """Y = min(max(X, min), max) with min/max attributes."""

    def scalar(self, x, node, t):
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
        ordered = lo is not None and hi is not None and lo <= hi
        return clamp(x, None if lo is None else float_literal(lo, t.compute),
                     None if hi is None else float_literal(hi, t.compute), ordered)


@register("Clip", since=11)
class Clip(Unary):
    """Y = min(max(X, min), max) with optional scalar min/max inputs."""
    types = dt.NUMERIC

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, self.types)
        for i, what in ((1, "min"), (2, "max")):
            if ctx.has(i):
                bound = ctx.inp(i)
                if bound.dtype != x.dtype:
                    raise ctx.fail(f"{what} has type {bound.dtype}, input has {x.dtype}")
                if ctx.dims.product(bound.shape) != 1:
                    raise ctx.fail(f"{what} must be a scalar, got shape {bound.shape}")
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        operands = [k.input(0)]
        at = {}  # input index of min/max -> operand position
        for i in (1, 2):
            if k.has_input(i):
                at[i] = len(operands)
                operands.append(k.input(i))

        def scalar(v: list[str]) -> str:
            return clamp(v[0], v[at[1]] if 1 in at else None, v[at[2]] if 2 in at else None)
        return elementwise_kernel(k, operands, scalar)
