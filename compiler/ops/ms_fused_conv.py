"""com.microsoft FusedConv: Conv [+ Z] followed by an activation (onnxruntime's Conv -> activation
fusion); onnxc's own fusion pass makes the same chain one kernel again."""
import math

import numpy as np

from ._contrib import MS, Composite, attributes, refuse
from .registry import register

# activation -> its attributes in activation_params order, and their defaults
_ACTIVATIONS = {"Relu": ((), ()), "Sigmoid": ((), ()), "Tanh": ((), ()),
                "LeakyRelu": (("alpha",), (0.01,)), "HardSigmoid": (("alpha", "beta"), (0.2, 0.5)),
                "Clip": (("min", "max"), (-math.inf, math.inf))}
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@register("FusedConv", since=1, domain=MS)
class MsFusedConv(Composite):
    """Y = activation(Conv(X, W, B) + Z): Conv's attributes plus ``activation`` (Relu, Sigmoid,
    Tanh, LeakyRelu, HardSigmoid or Clip; none when absent) and its ``activation_params``."""

    def expand(self, node, e):
        attrs = attributes(node, {a: None for a in _CONV_ATTRS + ("activation", "activation_params")})
        act = attrs.get("activation", "")
        if act and act not in _ACTIVATIONS:
            raise refuse(node, f"activation {act!r}")
        conv_inputs = [v for v in node.inputs[:3]]
        while conv_inputs and conv_inputs[-1] is None:
            conv_inputs.pop()
        conv_attrs = {a: attrs[a] for a in _CONV_ATTRS if a in attrs}
        y = e.op("Conv", conv_inputs, None if node.input(3) is not None or act else e.into(0), **conv_attrs)
        if node.input(3) is not None:
            y = e.op("Add", [y, node.inputs[3]], None if act else e.into(0))
        if not act:
            return
        names, defaults = _ACTIVATIONS[act]
        params = list(attrs.get("activation_params", ())) + list(defaults[len(attrs.get("activation_params", ())):])
        if act == "Clip":
            bounds = [e.const(np.array(p, node.inputs[0].dtype.np)) for p in params[:2]]
            e.op("Clip", [y] + bounds, e.into(0))
        else:
            e.op(act, [y], e.into(0), **dict(zip(names, params)))
