from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import check_index_type
from .registry import OpDef, register


@register("ReverseSequence", since=10)
class ReverseSequence(OpDef):
    """Y = X with the first sequence_lens[b] entries along time_axis reversed, for each batch b."""

    def infer(self, node, ctx):
        x, lens = ctx.inp(0), ctx.inp(1)
        check_index_type(ctx, lens.dtype, "sequence_lens", (dt.INT64,))
        batch_axis, time_axis = node.attrs.get("batch_axis", 1), node.attrs.get("time_axis", 0)
        if len(x.shape) < 2 or {batch_axis, time_axis} != {0, 1}:
            raise ctx.fail("input must be at least 2-D with batch_axis and time_axis 0 and 1")
        if len(lens.shape) != 1:
            raise ctx.fail(f"sequence_lens must be 1-D, got {lens.shape}")
        ctx.dims.same(lens.shape[0], x.shape[batch_axis])
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, lens, y = k.input(0), k.input(1), k.out
        batch_axis = node.attrs.get("batch_axis", 1)
        inner = cexpr.prod(x.dims[2:])
        # X viewed as (dim 0, dim 1, inner): strides of the batch and time axes.
        strides = [cexpr.mul(x.dims[1], inner), inner]
        batches = x.dims[batch_axis]
        checks = [] if lens.dims[0] == batches else [f"{cexpr.lit(lens.dims[0])} != {cexpr.lit(batches)}"]
        return k.kernel("c/reverse_sequence.c.j2", src=x.name, dst=y.name, ctype=y.ctype, lens=lens.name,
                        checks=checks,
                        batches=cexpr.lit(x.dims[batch_axis]), steps=cexpr.lit(x.dims[1 - batch_axis]),
                        batch_stride=cexpr.lit(strides[batch_axis]), time_stride=cexpr.lit(strides[1 - batch_axis]),
                        inner=cexpr.lit(inner))
