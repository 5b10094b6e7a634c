"""com.microsoft Gelu: onnxruntime's exact GELU (its BERT exports' fused Erf pattern)."""
from ._contrib import MS, Composite, attributes
from .registry import register


@register("Gelu", since=1, domain=MS)
class MsGelu(Composite):
    """Y = 0.5 * X * (1 + erf(X / sqrt(2))): ai.onnx Gelu."""

    def expand(self, node, e):
        attributes(node, {})
        e.op("Gelu", [node.inputs[0]], e.into(0), approximate="none")
