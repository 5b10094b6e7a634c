from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import check_index_type, const_ints, data_dims, vector_len
from .registry import OpDef, register


@register("Tile", since=6)
class Tile(OpDef):
    """Y = X repeated repeats[a] times along each axis a."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_index_type(ctx, ctx.inp(1).dtype, "repeats", (dt.INT64,))
        if vector_len(ctx, 1, "repeats") != len(x.shape):
            raise ctx.fail(f"repeats has {ctx.inp(1).shape[0]} entries for rank {len(x.shape)}")
        repeats = const_ints(ctx, 1)
        if repeats is None:
            return [(x.dtype, tuple(data_dims(ctx, node, len(x.shape))))]
        if any(r < 0 for r in repeats):
            raise ctx.fail(f"repeats {repeats} has a negative entry")
        return [(x.dtype, tuple(ctx.dims.mul(d, r) for d, r in zip(x.shape, repeats)))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        kernel = k.kernel("c/tile.c.j2", src=x.name, dst=y.name, ctype=y.ctype,
                          loops=[{"n": cexpr.lit(od), "dim": cexpr.lit(d), "stride": cexpr.lit(s)}
                                 for od, d, s in zip(y.dims, x.dims, x.strides)])
        if k.data_dims:
            kernel.shape_template = "c/tile_shape.c.j2"
            kernel.shape_data = {"in_dims": [cexpr.lit(d) for d in x.dims], "repeats": k.input(1).name}
        return kernel
