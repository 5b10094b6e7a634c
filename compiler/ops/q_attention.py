"""com.microsoft QAttention: Attention with an 8-bit QKV projection, as onnxruntime's
quantize_dynamic writes it for the Attention nodes its transformer optimizer fuses."""
from ._contrib import MS, Composite, invalid
from .ms_attention import attention_attributes, qkv_sizes, self_attention
from .registry import register


@register("QAttention", since=1, domain=MS)
class QAttention(Composite):
    """qkv = (input - input_zero_point) @ (weight - weight_zero_point) * (input_scale *
    weight_scale) + bias, the product in int32 and scaled in float32 as onnxruntime's kernel does
    (weight_scale and weight_zero_point per tensor or per column); then com.microsoft Attention's
    heads, mask_index and past from qkv."""

    def expand(self, node, e):
        attrs = attention_attributes(node, {})
        if len(node.inputs) < 5 or any(node.input(i) is None for i in range(5)):
            raise invalid(node, "input, weight, bias, input_scale and weight_scale are required")
        x, weight, bias, x_scale, w_scale = node.inputs[:5]
        sizes = qkv_sizes(node, weight, int(attrs["num_heads"]))
        qkv = e.contrib("MatMulIntegerToFloat", [x, weight, x_scale, w_scale, node.input(6), node.input(7), bias])
        self_attention(e, node, attrs, x, qkv, sizes, mask=node.input(5), past=node.input(8))
