"""com.microsoft QLinearWhere: Where on 8-bit tensors, as quantize_static (QOperator) writes it."""
from .. import dtypes as dt
from ._contrib import MS, Composite, attributes, invalid, one_value
from .registry import register


@register("QLinearWhere", since=1, domain=MS)
class QLinearWhere(Composite):
    """Z = quantize(where(condition, dequantize(X), dequantize(Y))) with each tensor's scale and
    zero point, broadcasting as Where: onnxruntime's kernel maps each 8-bit value through the
    same float32 dequantize and quantize (a copy where X's or Y's scale and zero point are Z's,
    which the round trip also gives)."""

    def expand(self, node, e):
        attributes(node, {})
        if len(node.inputs) != 9 or any(v is None for v in node.inputs):
            raise invalid(node, "condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale and "
                                "z_zero_point are required")
        condition, x, y = node.inputs[0], node.inputs[1], node.inputs[4]
        if x.dtype not in (dt.INT8, dt.UINT8) or y.dtype is not x.dtype:
            raise invalid(node, f"X and Y must both be int8 or uint8, got {x.dtype} and {y.dtype}")
        if node.inputs[8].dtype is not x.dtype:
            raise invalid(node, f"z_zero_point type {node.inputs[8].dtype} differs from X's {x.dtype}")

        def scalar(i: int, what: str):
            return one_value(e, node, node.inputs[i], what)
        real_x = e.op("DequantizeLinear", [x, scalar(2, "x_scale"), scalar(3, "x_zero_point")])
        real_y = e.op("DequantizeLinear", [y, scalar(5, "y_scale"), scalar(6, "y_zero_point")])
        e.op("QuantizeLinear", [e.op("Where", [condition, real_x, real_y]), scalar(7, "z_scale"),
                                scalar(8, "z_zero_point")], e.into(0))
