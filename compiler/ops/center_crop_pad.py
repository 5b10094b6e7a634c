from ...codegen import cexpr
from ._indexing import INDEX_TYPES, check_index_type, const_ints, data_dim, data_dim_ptrs, norm_axes, vector_len
from .registry import OpDef, register


@register("CenterCropPad", since=18)
class CenterCropPad(OpDef):
    """Y = X cropped or zero-padded to shape on axes (all axes by default), keeping it centred."""

    def axes(self, node, rank: int) -> list[int]:
        axes = node.attrs.get("axes")
        return [a % rank for a in axes] if axes else list(range(rank))

    def infer(self, node, ctx):
        x = ctx.inp(0)
        rank = len(x.shape)
        check_index_type(ctx, ctx.inp(1).dtype, "shape", INDEX_TYPES)
        axes = norm_axes(ctx, node.attrs.get("axes") or range(rank), rank)
        if vector_len(ctx, 1, "shape") != len(axes):
            raise ctx.fail(f"shape has {ctx.inp(1).shape[0]} entries for {len(axes)} axes")
        shape = const_ints(ctx, 1)
        out = list(x.shape)
        for i, a in enumerate(axes):
            if shape is None:
                out[a] = data_dim(ctx, node)
            elif shape[i] < 0:
                raise ctx.fail(f"shape {shape} has a negative dim")
            else:
                out[a] = shape[i]
        return [(x.dtype, tuple(out))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        axes = self.axes(node, x.rank)
        kernel = k.kernel("c/center_crop_pad.c.j2", src=x.name, dst=y.name, ctype=y.ctype, numel=cexpr.lit(y.numel),
                          loops=[{"in_dim": cexpr.lit(d), "out_dim": cexpr.lit(od), "in_stride": cexpr.lit(s),
                                  "out_stride": cexpr.lit(os), "resized": a in axes}
                                 for a, (d, od, s, os) in enumerate(zip(x.dims, y.dims, x.strides, y.strides))])
        if k.data_dims:
            ptrs = data_dim_ptrs(k, y)
            kernel.shape_template = "c/center_crop_pad_shape.c.j2"
            kernel.shape_data = {"shape": k.input(1).name, "dims": [ptrs[a] for a in axes]}
        return kernel
