"""Shared ``dims_value`` hooks: shape data through data-movement and integer arithmetic ops."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..ir import Node
from .registry import InferContext


def passthrough(node: Node, ctx: InferContext) -> Optional[np.ndarray]:
    """The output holds the input's elements in the same order (Reshape, Squeeze, Identity ...)."""
    return ctx.sym_array(0)


def arithmetic(combine: Callable[[InferContext, object, object], object]):
    """An elementwise hook over two broadcast operands whose elements are dims."""
    def hook(node: Node, ctx: InferContext) -> Optional[np.ndarray]:
        a, b = ctx.sym_array(0), ctx.sym_array(1)
        if a is None or b is None:
            return None
        a, b = np.broadcast_arrays(a, b)
        out = np.empty(a.shape, dtype=object)
        for index in np.ndindex(a.shape):
            out[index] = combine(ctx, a[index], b[index])
        return out
    return hook
