from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim, norm_axis
from .registry import OpDef, register


@register("Compress", since=9)
class Compress(OpDef):
    """Y = the slices of X along axis (of flattened X without axis) where condition is true."""

    def infer(self, node, ctx):
        x, cond = ctx.inp(0), ctx.inp(1)
        if cond.dtype != dt.BOOL or len(cond.shape) != 1:
            raise ctx.fail(f"condition must be a 1-D bool tensor, got {cond.type_str()}")
        if "axis" in node.attrs:
            axis = norm_axis(ctx, node.attrs["axis"], len(x.shape))
            dim = x.shape[axis]
        else:
            dim = ctx.dims.product(x.shape)
        selected = ctx.const(1)
        if selected is None or not isinstance(dim, int):
            count = data_dim(ctx, node)
        else:
            if selected[dim:].any():
                raise ctx.fail(f"condition selects indices beyond the dim {dim}")
            count = int(selected[:dim].sum())
        if "axis" not in node.attrs:
            return [(x.dtype, (count,))]
        return [(x.dtype, x.shape[:axis] + (count,) + x.shape[axis + 1:])]

    def lower(self, node, k):
        x, cond, y = k.input(0), k.input(1), k.out
        if "axis" in node.attrs:
            axis = node.attrs["axis"] % x.rank
            outer, dim, inner = cexpr.prod(x.dims[:axis]), x.dims[axis], cexpr.prod(x.dims[axis + 1:])
            count = y.dims[axis]
        else:
            outer, dim, inner, count = 1, x.numel, 1, y.dims[0]
        kernel = k.kernel("c/compress.c.j2", src=x.name, dst=y.name, ctype=y.ctype, condition=cond.name,
                          length=cexpr.lit(cond.dims[0]), outer=cexpr.lit(outer), dim=cexpr.lit(dim),
                          inner=cexpr.lit(inner), count=cexpr.lit(count))
        if k.data_dims:
            kernel.shape_template = "c/compress_shape.c.j2"
            kernel.shape_data = {"condition": cond.name, "length": cexpr.lit(cond.dims[0]), "dim": cexpr.lit(dim)}
        return kernel
