from ...codegen import cexpr
from .. import dtypes as dt
from ..dims import broadcast_shapes
from ._indexing import check_index_type, data_dim, data_dim_ptrs, strided_copy, vector_len
from .registry import OpDef, register


@register("Expand", since=8)
class Expand(OpDef):
    """Y = X broadcast (numpy rules) with the shape input."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_index_type(ctx, ctx.inp(1).dtype, "shape", (dt.INT64,))
        n = vector_len(ctx, 1, "shape")
        shape = ctx.sym_value(1)
        if shape is not None:
            if any(isinstance(s, int) and s < 0 for s in shape):
                raise ctx.fail(f"shape {shape} has a negative dim")
            return [(x.dtype, broadcast_shapes(ctx.dims, x.shape, tuple(shape)))]
        rank = max(len(x.shape), n)
        padded = (1,) * (rank - len(x.shape)) + tuple(x.shape)
        # A static input dim other than 1 is the output dim; the rest depend on the shape values.
        return [(x.dtype, tuple(d if isinstance(d, int) and d != 1 else data_dim(ctx, node)
                                for d in padded))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        pad = y.rank - x.rank
        strides = [0] * pad
        for d, s, od in zip(x.dims, x.strides, y.dims[pad:]):
            strides.append(0 if d == 1 else s if d == od else f"({d} == 1 ? 0 : {cexpr.lit(s)})")
        kernel = strided_copy(k, x, y.dims, strides)
        if k.data_dims:
            kernel.shape_template = "c/expand_shape.c.j2"
            kernel.shape_data = {"in_dims": ["1"] * pad + [cexpr.lit(d) for d in x.dims],
                                 "pad": y.rank - k.input(1).dims[0], "shape": k.input(1).name,
                                 "dim_ptrs": data_dim_ptrs(k, y)}
        return kernel
