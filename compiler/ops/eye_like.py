from ...codegen import cexpr
from .. import dtypes as dt
from ._elementwise import check_dtype
from .registry import OpDef, register

TYPES = dt.NUMERIC + (dt.BOOL,)


@register("EyeLike", since=9)
class EyeLike(OpDef):
    """output = a 2-D matrix shaped like input with ones on diagonal k, zeros elsewhere."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if len(x.shape) != 2:
            raise ctx.fail(f"input must be 2-D, not of shape {x.shape}")
        check_dtype(ctx, x.dtype, TYPES)
        dtype = dt.from_onnx(node.attrs["dtype"]) if "dtype" in node.attrs else x.dtype
        check_dtype(ctx, dtype, TYPES, "output")
        return [(dtype, x.shape)]

    def lower(self, node, k):
        y = k.out
        diagonal = max(min(node.attrs.get("k", 0), 2**62), -2**62)  # row + k must not overflow
        return k.kernel("c/eye_like.c.j2", output=y.name, ctype=y.ctype, rows=cexpr.lit(y.dims[0]),
                        cols=cexpr.lit(y.dims[1]), k=cexpr.lit(diagonal), one=y.store("1"))
