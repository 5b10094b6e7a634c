"""com.microsoft GridSample: onnxruntime's GridSample from before ai.onnx had one (opset 16)."""
from ._contrib import MS, Composite, attributes, invalid
from .registry import register

# GridSample-16 mode names, as ai.onnx GridSample-20 calls them
_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}


@register("GridSample", since=1, domain=MS)
class MsGridSample(Composite):
    """ai.onnx GridSample-16 on 4-D X: sample X at the (x, y) points of Grid."""

    def expand(self, node, e):
        attrs = attributes(node, {"align_corners": 0, "mode": "bilinear", "padding_mode": "zeros"})
        if attrs["mode"] not in _MODES:
            raise invalid(node, f"mode {attrs['mode']!r} is not one of {', '.join(_MODES)}")
        e.op("GridSample", node.inputs[:2], e.into(0), align_corners=attrs["align_corners"],
             mode=_MODES[attrs["mode"]], padding_mode=attrs["padding_mode"])
