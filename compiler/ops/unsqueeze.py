from ...codegen import cexpr
from .. import dtypes as dt
from ._copy import Copy
from ._dims_value import passthrough
from ._indexing import check_index_type, const_ints, data_dims, norm_axes, vector_len
from .registry import register


def unsqueezed_shape(ctx, shape: tuple, axes: list[int]) -> tuple:
    """``shape`` with a 1 inserted at each of ``axes`` (axes of the output)."""
    rank = len(shape) + len(axes)
    new = set(norm_axes(ctx, axes, rank))
    rest = iter(shape)
    return tuple(1 if a in new else next(rest) for a in range(rank))


@register("Unsqueeze", since=1, until=12)
class Unsqueeze1(Copy):
    """Y = X with size-1 axes inserted at the output axes listed in the axes attribute."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        if "axes" not in node.attrs:
            raise ctx.fail("the axes attribute is required")
        return [(x.dtype, unsqueezed_shape(ctx, x.shape, list(node.attrs["axes"])))]


@register("Unsqueeze", since=13)
class Unsqueeze(Copy):
    """Y = X with size-1 axes inserted at the output axes listed in the axes input."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_index_type(ctx, ctx.inp(1).dtype, "axes", (dt.INT64,))
        axes = const_ints(ctx, 1)
        if axes is None:
            rank = len(x.shape) + vector_len(ctx, 1, "axes")
            return [(x.dtype, tuple(data_dims(ctx, node, rank)))]
        return [(x.dtype, unsqueezed_shape(ctx, x.shape, axes))]

    def lower(self, node, k):
        kernel = super().lower(node, k)
        if k.data_dims:
            x = k.input(0)
            kernel.shape_template = "c/unsqueeze_shape.c.j2"
            kernel.shape_data = {"in_dims": [cexpr.lit(d) for d in x.dims], "axes": k.input(1).name,
                                 "num_axes": k.input(1).dims[0]}
        return kernel
