"""com.microsoft NhwcConv: Conv with channels last, as onnxruntime's NHWC fusion for diffusion
models writes it (X, W and Y channels-last; W as the fusion transposes it, (M, kH, kW, C/group))."""
from ._contrib import MS, Composite, attributes
from .registry import register

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@register("NhwcConv", since=1, domain=MS)
class NhwcConv(Composite):
    """Y = Conv(X, W, B) with the channel axis last in X, W and Y: X and W are transposed to
    channels-first, convolved, and Y transposed back."""

    def expand(self, node, e):
        attrs = attributes(node, {a: None for a in _CONV_ATTRS})
        rank = len(node.inputs[0].shape)
        first = (0, rank - 1) + tuple(range(1, rank - 1))
        last = (0,) + tuple(range(2, rank)) + (1,)
        x, w = (e.op("Transpose", [t], perm=first) for t in node.inputs[:2])
        bias = [node.inputs[2]] if node.input(2) is not None else []
        y = e.op("Conv", [x, w] + bias, **{a: attrs[a] for a in _CONV_ATTRS if a in attrs})
        e.op("Transpose", [y], e.into(0), perm=last)
