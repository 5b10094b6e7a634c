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
