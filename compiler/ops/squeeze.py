from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import RankKnownAtRunTime
from ._copy import Copy, unit_dim_checks
from ._dims_value import passthrough
from ._indexing import check_index_type, const_ints, data_dims, norm_axes, vector_len
from .registry import register


def squeezed_shape(ctx, shape: tuple, axes) -> tuple:
    """``shape`` without ``axes`` (None: without every dim that is 1)."""
    if axes is None:
        if any(isinstance(d, str) for d in shape):
            raise RankKnownAtRunTime(f"{ctx.node.label}: without axes, which dims of {list(shape)} are 1 "
                                     "is known only at run time")
        return tuple(d for d in shape if d != 1)
    axes = norm_axes(ctx, axes, len(shape))
    for a in axes:
        if isinstance(shape[a], int) and shape[a] != 1:
            raise ctx.fail(f"cannot squeeze axis {a} of size {shape[a]}")
    return tuple(d for a, d in enumerate(shape) if a not in axes)


@register("Squeeze", since=1, until=12)
class Squeeze1(Copy):
    """Y = X without the size-1 axes listed in the axes attribute (all size-1 axes by default)."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        return [(x.dtype, squeezed_shape(ctx, x.shape, node.attrs.get("axes") or None))]

    def checks(self, node, k):
        rank = k.input(0).rank
        return unit_dim_checks(k, [a % rank for a in node.attrs.get("axes", ())], "Squeeze")


@register("Squeeze", since=13)
class Squeeze(Copy):
    """Y = X without the size-1 axes listed in the axes input (all size-1 axes by default)."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        if not ctx.has(1):
            return [(x.dtype, squeezed_shape(ctx, x.shape, None))]
        check_index_type(ctx, ctx.inp(1).dtype, "axes", (dt.INT64,))
        axes = const_ints(ctx, 1)
        if axes is None:
            rank = len(x.shape) - vector_len(ctx, 1, "axes")
            if rank < 0:
                raise ctx.fail("axes has more entries than the input has dims")
            return [(x.dtype, tuple(data_dims(ctx, node, rank)))]
        return [(x.dtype, squeezed_shape(ctx, x.shape, axes))]

    def checks(self, node, k):
        axes = k.input(1).value if k.has_input(1) else None
        if axes is None:
            return []
        rank = k.input(0).rank
        return unit_dim_checks(k, [int(a) % rank for a in axes.reshape(-1)], "Squeeze")

    def lower(self, node, k):
        kernel = super().lower(node, k)
        if k.data_dims:
            x = k.input(0)
            kernel.shape_template = "c/squeeze_shape.c.j2"
            kernel.shape_data = {"in_dims": [cexpr.lit(d) for d in x.dims], "axes": k.input(1).name,
                                 "num_axes": k.input(1).dims[0]}
        return kernel
