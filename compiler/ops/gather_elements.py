from typing import Optional

import numpy as np

from ..errors import ShapeError
from ._indexing import check_elements_shapes, check_index_type, elements_data, norm_axis
from .registry import OpDef, register


@register("GatherElements", since=11)
class GatherElements(OpDef):
    """Y[i] = X[i with its axis coordinate replaced by indices[i]]; Y has the shape of indices."""

    def infer(self, node, ctx):
        x, indices = ctx.inp(0), ctx.inp(1)
        check_index_type(ctx, indices.dtype, "indices")
        axis = norm_axis(ctx, node.attrs.get("axis", 0), len(x.shape))
        check_elements_shapes(ctx, x.shape, indices.shape, axis)
        return [(x.dtype, indices.shape)]

    def lower(self, node, k):
        x, indices = k.input(0), k.input(1)
        axis = node.attrs.get("axis", 0) % x.rank
        return k.kernel("c/gather_elements.c.j2", src=x.name, dst=k.out.name,
                        **elements_data(k, x, indices, axis, "GatherElements"))

    def evaluate(self, node) -> Optional[list[np.ndarray]]:
        """onnx's reference evaluator takes np.choose, which accepts at most 32 choices, and its
        fallback fails past them (an axis of 128 positions: BERT's token type ids, gathered from
        an expanded constant): folded here with take_along_axis instead."""
        x, indices = node.inputs[0].const, node.inputs[1].const
        axis = node.attrs.get("axis", 0) % x.ndim
        size = x.shape[axis]
        idx = indices.astype(np.int64)
        if idx.size and (idx.min() < -size or idx.max() >= size):
            raise ShapeError(f"{node.label}: an index is outside [-{size}, {size - 1}] on axis {axis}")
        idx = np.where(idx < 0, idx + size, idx)
        # (indices may be shorter than the data on the other axes: the data's leading part)
        part = x[tuple(slice(None) if a == axis else slice(0, d) for a, d in enumerate(idx.shape))]
        return [np.ascontiguousarray(np.take_along_axis(part, idx, axis=axis))]
