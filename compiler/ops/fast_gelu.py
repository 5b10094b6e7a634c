"""com.microsoft FastGelu: the tanh approximation of GELU, with an optional bias added first."""
from ._contrib import MS, Composite, attributes
from .registry import register


@register("FastGelu", since=1, domain=MS)
class FastGelu(Composite):
    """Y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), x = X + bias."""

    def expand(self, node, e):
        attributes(node, {})
        x = node.inputs[0]
        if node.input(1) is not None:
            x = e.op("Add", [x, node.inputs[1]])
        e.op("Gelu", [x], e.into(0), approximate="tanh")
