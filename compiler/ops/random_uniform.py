from .. import dtypes as dt
from ._elementwise import check_dtype
from ._random import RandomOp, check_finite, draw_kernel, float_types
from .registry import register


@register("RandomUniform", since=1)
class RandomUniform(RandomOp):
    """output[shape] = low + (high - low) * u, u uniform in [0, 1)."""

    def infer(self, node, ctx):
        if "shape" not in node.attrs or any(d < 0 for d in node.attrs["shape"]):
            raise ctx.fail(f"attribute 'shape' must list dims >= 0, not {node.attrs.get('shape')}")
        check_finite(ctx, node, "low", "high")
        dtype = dt.from_onnx(node.attrs["dtype"])
        check_dtype(ctx, dtype, float_types(node), "output")
        return [(dtype, tuple(node.attrs["shape"]))]

    def lower(self, node, k):
        return draw_kernel(node, k, "uniform", node.attrs["low"], node.attrs["high"])
