from __future__ import annotations

from typing import Any

from ...codegen.kernel import TensorRef
from ..ir import Node
from ._conv_pool import Pool, lp_power, lp_root
from .registry import register


@register("LpPool", since=1)
class LpPool(Pool):
    """Y = (sum over each window of |x|^p)^(1/p); padding adds nothing."""
    kind = "lp"

    def reduction(self, node: Node, x: TensorRef) -> dict[str, Any]:
        p = node.attrs.get("p", 2)
        return {"init": "0", "step": f"acc += {lp_power(p, 'v', x.compute)};", "result": lp_root(p, "acc", x.compute)}
