from ...codegen import cexpr
from .. import dtypes as dt
from ._elementwise import check_dtype
from ._random import HELPER, RandomOp, float_types, key_data
from .registry import register


@register("Multinomial", since=7)
class Multinomial(RandomOp):
    """output[b, s] = a class drawn with probabilities softmax(input[b, :]), for each of
    ``sample_size`` samples of each batch row."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, float_types(node))
        if len(x.shape) != 2:
            raise ctx.fail(f"input must be 2-D [batch_size, class_size], not of shape {x.shape}")
        samples = node.attrs["sample_size"]
        if samples < 0:
            raise ctx.fail(f"sample_size must be >= 0, not {samples}")
        dtype = dt.from_onnx(node.attrs["dtype"])
        check_dtype(ctx, dtype, (dt.INT32, dt.INT64), "output")
        return [(dtype, (x.shape[0], samples))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        kernel = k.kernel("c/multinomial.c.j2", helpers=(HELPER,), input=x.name, output=y.name, ctype=y.ctype,
                          load=x.load("row + c"), batch=cexpr.lit(x.dims[0]), classes=cexpr.lit(x.dims[1]),
                          samples=cexpr.lit(y.dims[1]), **key_data(node, k))
        kernel.scratch = {"sums": cexpr.mul(8, x.dims[1])}
        return kernel
