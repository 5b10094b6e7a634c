from __future__ import annotations

from typing import Any

from ...codegen.kernel import TensorRef
from ..ir import Node
from ._conv_pool import Pool
from .registry import register


@register("AveragePool", since=1)
class AveragePool(Pool):
    """Y = mean over each window; padding counts when count_include_pad (opset 7+)."""
    kind = "avg"

    def reduction(self, node: Node, x: TensorRef) -> dict[str, Any]:
        return {"init": "0", "step": "acc += v;", "result": f"acc / ({x.compute})count"}

    def whole_plane_reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        # (no pads: the count is the plane's size, whatever count_include_pad says)
        return "0", "acc += v;", f"acc / ({x.compute}){size}"
