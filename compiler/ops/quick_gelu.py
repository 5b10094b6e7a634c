"""com.microsoft QuickGelu: GELU approximated by a scaled sigmoid (CLIP's activation)."""
import numpy as np

from ..errors import ShapeError
from ._contrib import MS, Composite, attributes
from .registry import register


@register("QuickGelu", since=1, domain=MS)
class QuickGelu(Composite):
    """Y = X * sigmoid(alpha * X)."""

    def expand(self, node, e):
        alpha = attributes(node, {"alpha": 1.702})["alpha"]
        x = node.inputs[0]
        if not x.dtype.is_float:
            raise ShapeError(f"{node.label}: X must be a float tensor, not {x.dtype}")
        gate = e.op("Sigmoid", [e.op("Mul", [x, e.const(np.array(alpha, x.dtype.np))])])
        e.op("Mul", [x, gate], e.into(0))
