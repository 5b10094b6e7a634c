from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import check_index_type
from .registry import OpDef, register


@register("GatherND", since=11)
class GatherND(OpDef):
    """Y[b, j] = the slice of X[b] at the index tuple indices[b, j, :] (b: the first batch_dims axes)."""

    def infer(self, node, ctx):
        x, indices = ctx.inp(0), ctx.inp(1)
        check_index_type(ctx, indices.dtype, "indices", (dt.INT64,))
        b = node.attrs.get("batch_dims", 0)
        r, q = len(x.shape), len(indices.shape)
        if q < 1 or not 0 <= b < min(r, q):
            raise ctx.fail(f"batch_dims {b} does not fit data rank {r} and indices rank {q}")
        depth = indices.shape[-1]
        if not isinstance(depth, int):
            raise ctx.fail("the last dim of indices must be static")
        if depth > r - b:
            raise ctx.fail(f"index tuples of length {depth} are too long for data rank {r}")
        batch = tuple(ctx.dims.same(d, e) for d, e in zip(x.shape[:b], indices.shape[:b]))
        return [(x.dtype, batch + indices.shape[b:-1] + x.shape[b + depth:])]

    def lower(self, node, k):
        x, indices = k.input(0), k.input(1)
        b = node.attrs.get("batch_dims", 0)
        depth = indices.dims[-1]
        strides = x.strides
        return k.kernel("c/gather_nd.c.j2", src=x.name, dst=k.out.name, indices=indices.name, ctype=x.ctype,
                        batches=cexpr.lit(cexpr.prod(x.dims[:b])), batch_stride=cexpr.lit(cexpr.prod(x.dims[b:])),
                        tuples=cexpr.lit(cexpr.prod(indices.dims[b:-1])), depth=depth,
                        dims=[cexpr.lit(d) for d in x.dims[b:b + depth]],
                        strides=[cexpr.lit(s) for s in strides[b:b + depth]],
                        slice=cexpr.lit(cexpr.prod(x.dims[b + depth:])))
