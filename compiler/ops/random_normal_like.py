from .. import dtypes as dt
from ._elementwise import check_dtype
from ._random import RandomOp, check_finite, draw_kernel, float_types
from .registry import register


@register("RandomNormalLike", since=1)
class RandomNormalLike(RandomOp):
    """output = mean + scale * z, z standard normal, shaped like input (of its type unless
    ``dtype`` says)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_finite(ctx, node, "mean", "scale")
        dtype = dt.from_onnx(node.attrs["dtype"]) if "dtype" in node.attrs else x.dtype
        check_dtype(ctx, dtype, float_types(node), "output")
        return [(dtype, x.shape)]

    def lower(self, node, k):
        return draw_kernel(node, k, "normal", node.attrs["mean"], node.attrs["scale"])
