from .. import dtypes as dt
from ._binary import Broadcasting
from ._cast import CAST_HELPERS, float_to_int
from ._elementwise import check_dtype, elementwise_kernel
from .registry import register


def small_power(node) -> int:
    """2 or 3 where a float32 or double Pow's exponent is that constant (GPT-2's GELU cubes x),
    else 0: onnxruntime multiplies then (x * x * x, whose rounding differs from powf's), and so
    do we, as a plain product that fuse_elementwise can inline."""
    x, y = node.inputs[0], node.input(1)
    if x is None or x.dtype not in (dt.FLOAT, dt.DOUBLE) or y is None or y.dtype is not x.dtype or y.const is None \
            or y.const.size != 1:
        return 0
    value = float(y.const.reshape(-1)[0])
    return int(value) if value in (2.0, 3.0) else 0


@register("Pow", since=1, until=11)
class Pow1(Broadcasting):
    """Z = X ^ Y, broadcasting, float types."""
    types = dt.FLOATS

    def scalar(self, a, b, node, t):
        power = small_power(node)
        if power:
            product = " * ".join([f"({a})"] * power)
            return f"((void)({b}), {product})" if b else product   # (a fused loop loads b anyway)
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
        if small_power(node):   # (the exponent is not read)
            return elementwise_kernel(k, [x], lambda v: self.scalar(v[0], "", node, x))
        if x.dtype.is_float and x.compute == y.compute:
            return elementwise_kernel(k, [x, y], lambda v: self.scalar(v[0], v[1], node, x))

        def scalar(v: list[str]) -> str:
            power = f"pow((double){v[0]}, (double){v[1]})"
            return float_to_int(power, x.dtype) if x.dtype.is_int else f"({x.compute}){power}"
        kernel = elementwise_kernel(k, [x, y], scalar)
        if x.dtype.is_int:
            kernel.helpers.append(CAST_HELPERS)
        return kernel
