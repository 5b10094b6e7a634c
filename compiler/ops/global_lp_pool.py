from __future__ import annotations

from ...codegen.kernel import TensorRef
from ..ir import Node
from ._conv_pool import GlobalPool, lp_power, lp_root
from .registry import register


@register("GlobalLpPool", since=1)
class GlobalLpPool(GlobalPool):
    """Y[n, c] = (sum of |X[n, c]|^p over all spatial positions)^(1/p)."""

    def reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        p = node.attrs.get("p", 2)
        return "0", f"acc += {lp_power(p, 'v', x.compute)};", lp_root(p, "acc", x.compute)
