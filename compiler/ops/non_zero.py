import numpy as np

from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim
from .registry import OpDef, register


@register("NonZero", since=9)
class NonZero(OpDef):
    """Y[a, n] = coordinate a of the n-th non-zero element of X (row-major order)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        value = ctx.const(0)
        count = data_dim(ctx, node) if value is None else int(np.count_nonzero(value))
        return [(dt.INT64, (len(x.shape), count))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        kernel = k.kernel("c/non_zero.c.j2", src=x.name, dst=y.name, dims=[cexpr.lit(d) for d in x.dims],
                          test=f"{x.load('o')} != 0", count=cexpr.lit(y.dims[1]))
        if k.data_dims:
            kernel.shape_template = "c/non_zero_shape.c.j2"
            kernel.shape_data = {"test": x.load("o") + " != 0", "numel": cexpr.lit(x.numel)}
        return kernel
