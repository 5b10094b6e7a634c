from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._indexing import check_index_type, const_ints, data_dim, data_dim_ptrs, data_dims, norm_axis, vector_len
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


@register("Tile", since=1, until=5)
class Tile1(Tile):
    """Y = X repeated tiles times along axis (both scalars; the schema types them like X, int64 is
    accepted too). axis must be known at compile time, tiles may be computed at run time."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        for i, what in ((1, "tiles"), (2, "axis")):
            v = ctx.inp(i)
            if v.dtype not in (x.dtype, dt.INT64):
                raise ctx.fail(f"{what} must be {x.dtype} or int64, got {v.dtype}")
            if v.shape not in ((), (1,)):
                raise ctx.fail(f"{what} must hold one value, got shape {v.shape}")
        if ctx.const(2) is None:
            raise UnsupportedError(f"{node.label}: axis must be a constant")
        axis = norm_axis(ctx, _whole(ctx, 2, "axis"), len(x.shape))
        out = list(x.shape)
        if ctx.const(1) is None:
            out[axis] = data_dim(ctx, node)
        else:
            tiles = _whole(ctx, 1, "tiles")
            if tiles < 0:
                raise ctx.fail(f"tiles {tiles} is negative")
            out[axis] = ctx.dims.mul(x.shape[axis], tiles)
        return [(x.dtype, tuple(out))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        kernel = k.kernel("c/tile.c.j2", src=x.name, dst=y.name, ctype=y.ctype,
                          loops=[{"n": cexpr.lit(od), "dim": cexpr.lit(d), "stride": cexpr.lit(s)}
                                 for od, d, s in zip(y.dims, x.dims, x.strides)])
        if k.data_dims:
            axis = next(a for a, p in enumerate(data_dim_ptrs(k, y)) if p is not None)
            kernel.shape_template = "c/tile1_shape.c.j2"
            kernel.shape_data = {"in_dim": cexpr.lit(x.dims[axis]), "tiles": k.input(1).load("0"),
                                 "dim_ptr": k.data_dims[0]}
        return kernel


def _whole(ctx, i: int, what: str) -> int:
    value = ctx.const(i).reshape(-1)[0]
    if int(value) != value:
        raise ctx.fail(f"{what} {value} is not a whole number")
    return int(value)
