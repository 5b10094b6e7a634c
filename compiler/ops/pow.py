from .. import dtypes as dt
from ._binary import Broadcasting
from ._cast import CAST_HELPERS, float_to_int
from ._elementwise import check_dtype, elementwise_kernel
from .registry import register


@register("Pow", since=1, until=11)
class Pow1(Broadcasting):
    """Z = X ^ Y, broadcasting, float types."""
    types = dt.FLOATS

    def scalar(self, a, b, node, t):
        return f"{'pow' if t.compute == 'double' else 'powf'}({a}, {b})"


@register("Pow", since=12)
class Pow(Pow1):
    """Z = X ^ Y, broadcasting; Y may have another type than X. Like onnxruntime, operands of
    different compute types give a double power, truncated when X is an integer."""
    types = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16, dt.BFLOAT16, dt.INT32, dt.INT64)

    def check_pair(self, ctx, a, b):
        check_dtype(ctx, b, dt.NUMERIC, "exponent")

    def lower(self, node, k):
        x, y = self.operands(node, k)
        if x.dtype.is_float and x.compute == y.compute:
            return elementwise_kernel(k, [x, y], lambda v: self.scalar(v[0], v[1], node, x))

        def scalar(v: list[str]) -> str:
            power = f"pow((double){v[0]}, (double){v[1]})"
            return float_to_int(power, x.dtype) if x.dtype.is_int else f"({x.compute}){power}"
        kernel = elementwise_kernel(k, [x, y], scalar)
        if x.dtype.is_int:
            kernel.helpers.append(CAST_HELPERS)
        return kernel
