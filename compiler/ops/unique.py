import numpy as np

from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim, norm_axis
from .registry import OpDef, register


@register("Unique", since=11)
class Unique(OpDef):
    """Y, indices, inverse_indices, counts = the distinct elements (or slices along axis) of X."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        value = ctx.const(0)
        if "axis" in node.attrs:
            axis = norm_axis(ctx, node.attrs["axis"], len(x.shape))
            n = x.shape[axis]
        else:
            axis, n = None, ctx.dims.product(x.shape)
        if value is None:
            count = data_dim(ctx, node)
        else:
            count = len(np.unique(value, axis=axis, return_index=True)[1])
        y = (count,) if axis is None else x.shape[:axis] + (count,) + x.shape[axis + 1:]
        return [(x.dtype, y), (dt.INT64, (count,)), (dt.INT64, (n,)), (dt.INT64, (count,))][:len(node.outputs)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        if "axis" in node.attrs:
            axis = node.attrs["axis"] % x.rank
            outer, n, inner = cexpr.prod(x.dims[:axis]), x.dims[axis], cexpr.prod(x.dims[axis + 1:])
            unique = y.dims[axis]
        else:
            outer, n, inner, unique = 1, x.numel, 1, y.dims[0]
        p = {"outer": cexpr.lit(outer), "n": cexpr.lit(n), "inner": cexpr.lit(inner), "load": x.load("{}"),
             "compute": x.compute}
        names = [k.outputs[i].name if i < len(k.outputs) else None for i in (1, 2, 3)]
        kernel = k.kernel("c/unique.c.j2", p=p, X=x.name, Y=y.name, ctype=y.ctype, unique=cexpr.lit(unique),
                          sorted=bool(node.attrs.get("sorted", 1)), indices=names[0], inverse=names[1],
                          counts=names[2])
        kernel.scratch = {"work": cexpr.mul(48, n)}
        if k.data_dims:
            kernel.shape_template = "c/unique_shape.c.j2"
            kernel.allocates = True   # (its work buffer: the output's size is not known yet)
            kernel.shape_data = {"p": p}
        return kernel
