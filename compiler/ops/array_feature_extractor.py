from ...codegen import cexpr
from .. import dtypes as dt
from .registry import OpDef, register


@register("ArrayFeatureExtractor", since=1, domain="ai.onnx.ml")
class ArrayFeatureExtractor(OpDef):
    """Z[..., j] = X[..., Y[j]]: the selected features along the last axis (a 1-D X gives [1, n])."""

    def infer(self, node, ctx):
        x, y = ctx.inp(0), ctx.inp(1)
        if x.dtype not in (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.INT32, dt.STRING):
            raise ctx.fail(f"X type {x.dtype} is not supported")
        if y.dtype != dt.INT64:
            raise ctx.fail("Y must be int64")
        if not x.shape:
            raise ctx.fail("X must have at least one dim")
        count = ctx.dims.product(y.shape)
        lead = x.shape[:-1] if len(x.shape) > 1 else (1,)
        return [(x.dtype, tuple(lead) + (count,))]

    def lower(self, node, k):
        x, y, z = k.input(0), k.input(1), k.out
        return k.kernel("c/array_feature_extractor.c.j2", X=x.name, Y=y.name, Z=z.name,
                        rows=cexpr.lit(cexpr.prod(x.dims[:-1])), features=cexpr.lit(x.dims[-1]),
                        count=cexpr.lit(y.numel))
