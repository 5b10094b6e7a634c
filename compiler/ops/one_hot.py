import math

from ...codegen import cexpr
from .. import dtypes as dt
from ._elementwise import check_dtype
from ._indexing import data_dim
from .registry import OpDef, register


def index_kind(t: dt.DType) -> str:
    """How the kernels turn a value of ``t`` into an int64 index."""
    if t.is_float:
        return "float"
    return "uint64" if t is dt.UINT64 else "int"


@register("OneHot", since=9)
class OneHot(OpDef):
    """Y = values[1] where the new axis equals indices (negative ones count from depth), values[0] elsewhere."""

    def infer(self, node, ctx):
        indices, depth, values = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        check_dtype(ctx, indices.dtype, dt.NUMERIC, "indices")
        check_dtype(ctx, depth.dtype, dt.NUMERIC, "depth")
        if len(depth.shape) > 1 or depth.shape not in ((), (1,)):
            raise ctx.fail(f"depth must be a scalar or have one element, got shape {depth.shape}")
        if values.shape != (2,):
            raise ctx.fail(f"values must have shape (2,), got {values.shape}")
        rank = len(indices.shape) + 1
        axis = node.attrs.get("axis", -1)
        if not -rank <= axis < rank:
            raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        d = ctx.const(1)
        if d is None:
            n = data_dim(ctx, node)
        else:
            value = float(d.reshape(-1)[0])
            if not math.isfinite(value) or value < 0:
                raise ctx.fail(f"depth {value} is invalid")
            n = int(value)
        return [(values.dtype, indices.shape[:axis] + (n,) + indices.shape[axis:])]

    def lower(self, node, k):
        indices, depth, values, y = k.input(0), k.input(1), k.input(2), k.out
        axis = node.attrs.get("axis", -1) % y.rank
        kernel = k.kernel("c/one_hot.c.j2", indices=indices.name, values=values.name, dst=y.name, ctype=y.ctype,
                          numel=cexpr.lit(y.numel), depth=cexpr.lit(y.dims[axis]), kind=index_kind(indices.dtype),
                          index=indices.load("j"), outer=cexpr.lit(cexpr.prod(y.dims[:axis])),
                          inner=cexpr.lit(cexpr.prod(y.dims[axis + 1:])))
        if k.data_dims:
            kernel.shape_template = "c/one_hot_shape.c.j2"
            kernel.shape_data = {"depth": depth.name, "value": depth.load("0"), "kind": index_kind(depth.dtype)}
        return kernel
