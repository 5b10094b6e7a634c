from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import check_index_type
from .registry import OpDef, register


@register("Trilu", since=14)
class Trilu(OpDef):
    """Y = X with the elements below (upper=1) or above (upper=0) diagonal k of each matrix zeroed."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if len(x.shape) < 2:
            raise ctx.fail(f"input must be at least 2-D, got {x.shape}")
        if ctx.has(1):
            check_index_type(ctx, ctx.inp(1).dtype, "k", (dt.INT64,))
            if ctx.inp(1).shape not in ((), (1,)):
                raise ctx.fail(f"k must be a scalar, got shape {ctx.inp(1).shape}")
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        rows, cols = x.dims[-2], x.dims[-1]
        return k.kernel("c/trilu.c.j2", src=x.name, dst=y.name, ctype=y.ctype, upper=node.attrs.get("upper", 1),
                        diag=f"{k.input(1).name}[0]" if k.has_input(1) else "0",
                        matrices=cexpr.lit(cexpr.prod(x.dims[:-2])), rows=cexpr.lit(rows), cols=cexpr.lit(cols))
