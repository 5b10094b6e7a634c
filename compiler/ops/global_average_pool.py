from __future__ import annotations

from ...codegen.kernel import TensorRef
from ..ir import Node
from ._conv_pool import GlobalPool
from .registry import register


@register("GlobalAveragePool", since=1)
class GlobalAveragePool(GlobalPool):
    """Y[n, c] = mean of X[n, c] over all spatial positions."""

    def reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        return "0", "acc += v;", f"acc / ({x.compute}){size}"
