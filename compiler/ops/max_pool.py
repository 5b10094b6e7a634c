from __future__ import annotations

from typing import Any

from ...codegen.kernel import TensorRef
from .. import dtypes as dt
from ..ir import Node
from ._conv_pool import Pool
from ._reduce import lowest
from .registry import register


@register("MaxPool", since=1)
class MaxPool(Pool):
    """Y = max over each window; Indices = flat position of the first maximum (opset 8+)."""
    kind = "max"
    types = dt.FLOATS + (dt.INT8, dt.UINT8)

    def reduction(self, node: Node, x: TensorRef) -> dict[str, Any]:
        # NaNs are skipped (as onnxruntime does); with Indices, the first maximum wins.
        better = "v > acc || (arg < 0 && v == v)" if x.dtype.is_float else "v > acc || arg < 0"
        return {"init": lowest(x.dtype), "better": better, "step": "acc = v > acc ? v : acc;", "result": "acc"}

    def whole_plane_reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        return lowest(x.dtype), "acc = v > acc ? v : acc;", "acc"   # (NaNs skipped, as above)
