from __future__ import annotations

from ...codegen.kernel import TensorRef
from ..ir import Node
from ._conv_pool import GlobalPool
from .registry import register


@register("GlobalMaxPool", since=1)
class GlobalMaxPool(GlobalPool):
    """Y[n, c] = max of X[n, c] over all spatial positions."""

    def reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        return "-INFINITY", "acc = v > acc ? v : acc;", "acc"
