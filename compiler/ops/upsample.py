import numpy as np

from ..ir import Node
from ._resize import ResizeAttrs, ResizeBase, Sizing, attrs_from_node, check_attrs, sizing_of
from .registry import InferContext, register


class _Upsample(ResizeBase):
    def _sizing(self, node: Node, ctx: InferContext, rank: int) -> Sizing:
        raise NotImplementedError

    def _setup(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        if len(x.shape) == 0:
            raise ctx.fail("X must have at least one dim")
        attrs = ResizeAttrs(mode=attrs_from_node(node).mode)
        if attrs.mode not in ("nearest", "linear"):
            raise ctx.fail(f"mode {attrs.mode!r} is not nearest or linear")
        axes = check_attrs(ctx, attrs, x.dtype, len(x.shape))
        return attrs, axes, self._sizing(node, ctx, len(axes))


@register("Upsample", since=7, until=8)
class Upsample7(_Upsample):
    """Y = X upsampled by the scales attribute (nearest or linear, asymmetric coordinates)."""

    def _sizing(self, node, ctx, rank):
        scales = np.array(node.attrs["scales"], dtype=np.float32)
        if scales.shape != (rank,):
            raise ctx.fail(f"scales must have {rank} entries, got {len(scales)}")
        return Sizing("scales", None, scales)


@register("Upsample", since=9, until=10)
class Upsample9(_Upsample):
    """Y = X upsampled by the scales input (nearest or linear, asymmetric coordinates)."""

    def _sizing(self, node, ctx, rank):
        return sizing_of(ctx, 1, None, rank)
