import dataclasses

from ...codegen import cexpr
from ...codegen.names import c_string
from .. import dtypes as dt
from ._elementwise import Unary, check_dtype, elementwise_kernel
from .registry import register


@register("PRelu", since=7)
class PRelu(Unary):
    """Y = X for X >= 0, slope * X otherwise; slope broadcasts to X."""
    types = dt.FLOATS + (dt.INT32, dt.INT64, dt.UINT32, dt.UINT64)

    def infer(self, node, ctx):
        x, slope = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, self.types)
        if slope.dtype != x.dtype:
            raise ctx.fail(f"slope has type {slope.dtype}, X has {x.dtype}")
        if len(slope.shape) > len(x.shape):
            raise ctx.fail(f"slope shape {slope.shape} does not broadcast to X shape {x.shape}")
        for s, d in zip(reversed(slope.shape), reversed(x.shape)):
            if isinstance(s, int) and isinstance(d, int) and s not in (1, d):
                raise ctx.fail(f"slope shape {slope.shape} does not broadcast to X shape {x.shape}")
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, slope = k.input(0), k.input(1)
        kernel = elementwise_kernel(k, [x, slope], lambda v: self.scalar(v[0], v[1], x))
        # Symbolic dims: slope must be 1 or X's dim, else reading it would go out of bounds.
        pad = x.rank - slope.rank
        checks = [{"slope": cexpr.lit(s), "x": cexpr.lit(d)} for s, d in zip(slope.dims, x.dims[pad:])
                  if s != 1 and s != d]
        kernel.template = "c/prelu.c.j2"
        kernel.data["checks"] = checks
        kernel.data["message"] = c_string("PRelu: slope does not broadcast to X")
        return kernel

    @staticmethod
    def scalar(x: str, slope: str, t) -> str:
        if t.dtype.kind == "uint":  # never negative
            return f"((void){slope}, {x})"
        if t.dtype.is_float:
            return f"({x} < 0 ? {slope} * {x} : {x})"
        return f"({x} < 0 ? ({t.ctype})((uint64_t){slope} * (uint64_t){x}) : {x})"  # wraps, no overflow


@register("PRelu", since=1, until=6)
class PRelu1(PRelu):
    """PRelu before opset 7, float types only: a slope of one element is shared by every channel,
    a 1-D slope that does not broadcast to X has one value per channel (axis 1, the Caffe2
    layout these versions come from), any other slope broadcasts as at opset 7. PRelu-1's
    consumed_inputs is a legacy in-place hint that does not change the result."""
    types = dt.FLOATS

    @staticmethod
    def per_channel(slope_shape, x_shape) -> bool:
        if len(slope_shape) != 1 or len(x_shape) < 2 or slope_shape[0] == 1:
            return False
        return slope_shape[0] == x_shape[1] and slope_shape[0] != x_shape[-1]

    def infer(self, node, ctx):
        x, slope = ctx.inp(0), ctx.inp(1)
        if self.per_channel(slope.shape, x.shape):
            check_dtype(ctx, x.dtype, self.types)
            if slope.dtype != x.dtype:
                raise ctx.fail(f"slope has type {slope.dtype}, X has {x.dtype}")
            return [(x.dtype, x.shape)]
        return super().infer(node, ctx)

    def lower(self, node, k):
        x, slope = k.input(0), k.input(1)
        if not self.per_channel(slope.shape, x.shape):
            return super().lower(node, k)
        channels = [slope.dims[0]] + [1] * (x.rank - 2)
        slope = dataclasses.replace(slope, shape=(slope.shape[0],) + (1,) * (x.rank - 2), dims=channels)
        return elementwise_kernel(k, [x, slope], lambda v: self.scalar(v[0], v[1], x))
