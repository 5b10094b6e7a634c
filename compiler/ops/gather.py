import numpy as np

from ...codegen import cexpr
from ._indexing import check_index_type, norm_axis
from .registry import OpDef, register


@register("Gather", since=1)
class Gather(OpDef):
    """Y = the slices of X along axis picked by indices (negative indices count from the end)."""

    def infer(self, node, ctx):
        x, indices = ctx.inp(0), ctx.inp(1)
        check_index_type(ctx, indices.dtype, "indices")
        axis = norm_axis(ctx, node.attrs.get("axis", 0), len(x.shape))
        return [(x.dtype, x.shape[:axis] + indices.shape + x.shape[axis + 1:])]

    def dims_value(self, node, ctx):
        data, indices = ctx.sym_array(0), ctx.const(1)
        if data is None or indices is None:
            return None
        axis = node.attrs.get("axis", 0) % data.ndim
        if np.any(indices < -data.shape[axis]) or np.any(indices >= data.shape[axis]):
            raise ctx.fail("index out of range in shape data")
        return np.take(data, indices, axis=axis)

    def lower(self, node, k):
        x, indices, y = k.input(0), k.input(1), k.out
        axis = node.attrs.get("axis", 0) % x.rank
        return k.kernel("c/gather.c.j2", src=x.name, dst=y.name, indices=indices.name, ctype=x.ctype,
                        outer=cexpr.lit(cexpr.prod(x.dims[:axis])), dim=cexpr.lit(x.dims[axis]),
                        count=cexpr.lit(indices.numel), inner=cexpr.lit(cexpr.prod(x.dims[axis + 1:])))
