"""com.microsoft BiasGelu: exact GELU of A + B (onnxruntime fuses Add -> Gelu into it)."""
from ._contrib import MS, Composite, attributes
from .registry import register


@register("BiasGelu", since=1, domain=MS)
class BiasGelu(Composite):
    """C = Gelu(A + B), B broadcast onto A."""

    def expand(self, node, e):
        attributes(node, {})
        e.op("Gelu", [e.op("Add", node.inputs[:2])], e.into(0), approximate="none")
