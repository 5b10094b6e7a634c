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


@register("Upsample", since=1, until=6)
class Upsample1(_Upsample):
    """Y = X (N x C x H x W) upsampled by height_scale and width_scale, nearest or bilinear
    (asymmetric coordinates): floor(H * height_scale) rows, floor(W * width_scale) columns."""

    def _setup(self, node, ctx):
        if len(ctx.inp(0).shape) != 4:
            raise ctx.fail(f"X must be 4-D (N x C x H x W), got rank {len(ctx.inp(0).shape)}")
        if node.attrs.get("mode", "nearest") not in ("nearest", "bilinear"):
            raise ctx.fail(f"mode {node.attrs['mode']!r} is not nearest or bilinear")
        return super()._setup(node, ctx)

    def _sizing(self, node, ctx, rank):
        scales = np.array([1.0, 1.0, node.attrs["height_scale"], node.attrs["width_scale"]], dtype=np.float32)
        if (scales < 1).any():
            raise ctx.fail(f"height_scale and width_scale must be >= 1, got {scales[2:].tolist()}")
        return Sizing("scales", None, scales)
