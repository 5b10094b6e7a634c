from ..ir import Node
from ._resize import ResizeAttrs, ResizeBase, attrs_from_node, check_attrs, sizing_of
from .registry import InferContext, register


@register("Resize", since=10, until=10)
class Resize10(ResizeBase):
    """Y = X resized by the scales input (nearest or linear, asymmetric coordinates)."""

    def _setup(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        attrs = ResizeAttrs(mode=attrs_from_node(node).mode)
        axes = check_attrs(ctx, attrs, x.dtype, len(x.shape))
        if attrs.mode == "cubic":
            raise ctx.fail("cubic mode needs Resize-11 or later")
        return attrs, axes, sizing_of(ctx, 1, None, len(axes))


@register("Resize", since=11)
class Resize(ResizeBase):
    """Y = X resized by scales or sizes: nearest/linear/cubic, every coordinate transformation mode."""
    roi_index = 1

    def _setup(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        if len(x.shape) == 0:
            raise ctx.fail("X must have at least one dim")
        attrs = attrs_from_node(node)
        if node.version < 18 and attrs.coord == "half_pixel_symmetric":
            raise ctx.fail("half_pixel_symmetric needs Resize-19")
        axes = check_attrs(ctx, attrs, x.dtype, len(x.shape))
        return attrs, axes, sizing_of(ctx, 2, 3, len(axes))
