from .. import dtypes as dt
from ._elementwise import check_dtype
from ._random import RandomOp, draw_kernel, float_types
from .registry import register

OUTPUT_TYPES = dt.NUMERIC + (dt.BOOL,)


@register("Bernoulli", since=15)
class Bernoulli(RandomOp):
    """output[i] = 1 with probability input[i], else 0 (of the input's type unless ``dtype`` says)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, float_types(node))
        dtype = dt.from_onnx(node.attrs["dtype"]) if "dtype" in node.attrs else x.dtype
        check_dtype(ctx, dtype, OUTPUT_TYPES, "output")
        return [(dtype, x.shape)]

    def lower(self, node, k):
        return draw_kernel(node, k, "bernoulli", 0.0, 0.0, probs=k.input(0))
