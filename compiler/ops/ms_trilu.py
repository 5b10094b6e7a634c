"""com.microsoft Trilu: onnxruntime's Trilu from before ai.onnx had one (opset 14)."""
from ._contrib import MS, Composite, attributes
from .registry import register


@register("Trilu", since=1, domain=MS)
class MsTrilu(Composite):
    """ai.onnx Trilu: the upper (upper=1) or lower triangle of each matrix from diagonal k."""

    def expand(self, node, e):
        upper = attributes(node, {"upper": 1})["upper"]
        e.op("Trilu", node.inputs[:2], e.into(0), upper=upper)
