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
