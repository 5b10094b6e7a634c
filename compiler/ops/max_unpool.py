from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._conv_pool import window
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("MaxUnpool", since=9)
class MaxUnpool(OpDef):
    """output = zeros with output[I[i]] = X[i]; I holds flat positions in the default output
    shape (as MaxPool produces them), which output_shape may enlarge at the end of each axis."""

    def infer(self, node: Node, ctx: InferContext):
        x, ind = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        if ind.dtype != dt.INT64:
            raise ctx.fail(f"I must be int64, got {ind.dtype}")
        if len(x.shape) < 3 or len(ind.shape) != len(x.shape):
            raise ctx.fail(f"X {list(x.shape)} and I {list(ind.shape)} must have the same rank, at least 3")
        rank = len(x.shape) - 2
        if ctx.has(2):
            shape = ctx.inp(2)
            if shape.dtype != dt.INT64 or shape.shape != (len(x.shape),):
                raise ctx.fail(f"output_shape must be an int64 vector of {len(x.shape)} values")
            values = ctx.const(2)
            if values is None:
                return [(x.dtype, tuple(ctx.dims.data(node.name or "MaxUnpool") for _ in x.shape))]
            if any(v < 0 for v in values):
                raise ctx.fail(f"output_shape {values.tolist()} has a negative dim")
            return [(x.dtype, tuple(int(v) for v in values))]
        win = window(node, rank, node.attrs.get("kernel_shape", ()), ctx.fail)
        try:
            spatial = [ctx.dims.add(ctx.dims.mul(ctx.dims.sub(d, 1), win.strides[a]),
                                    win.kernel[a] - win.pads[a] - win.pads[rank + a])
                       for a, d in enumerate(x.shape[2:])]
        except ShapeError as e:
            raise ctx.fail(str(e)) from None
        return [(x.dtype, (x.shape[0], x.shape[1], *spatial))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, ind, y = k.input(0), k.input(1), k.out
        checks = []
        if x.numel != ind.numel:
            checks.append({"cond": f"{cexpr.lit(x.numel)} != {cexpr.lit(ind.numel)}",
                           "msg": c_string("MaxUnpool: X and I have different shapes")})
        rank = x.rank - 2
        win = window(node, rank, node.attrs.get("kernel_shape", ()), k.unsupported)
        default = x.dims[:2] + [cexpr.add(cexpr.mul(cexpr.add(d, -1), win.strides[a]),
                                          win.kernel[a] - win.pads[a] - win.pads[rank + a])
                                for a, d in enumerate(x.dims[2:])]
        axes = [] if default == y.dims else [
            {"size": cexpr.lit(d), "out": cexpr.lit(o), "stride": cexpr.lit(s)}
            for d, o, s in zip(default, y.dims, y.strides)][::-1]
        kernel = k.kernel("c/max_unpool.c.j2", checks=checks, X=x.name, I=ind.name, Y=y.name, axes=axes,
                          x_count=cexpr.lit(x.numel), y_count=cexpr.lit(y.numel),
                          default_count=cexpr.lit(cexpr.prod(default)))
        if k.data_dims:
            kernel.shape_template = "c/max_unpool_shape.c.j2"
            kernel.shape_data = {"output_shape": k.input(2).name}
        return kernel
