from ...codegen import cexpr
from ...codegen.names import c_string
from .. import dtypes as dt
from ._indexing import check_index_type, reduction_expr
from .registry import OpDef, register

REDUCTIONS = ("none", "add", "mul", "max", "min")


@register("ScatterND", since=11)
class ScatterND(OpDef):
    """Y = X, then the slice of Y at each index tuple indices[j, :] takes (or reduces in) updates[j]."""

    def infer(self, node, ctx):
        x, indices, updates = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        check_index_type(ctx, indices.dtype, "indices", (dt.INT64,))
        if updates.dtype != x.dtype:
            raise ctx.fail(f"updates type {updates.dtype} differs from data type {x.dtype}")
        if node.attrs.get("reduction", "none") not in REDUCTIONS:
            raise ctx.fail(f"unknown reduction {node.attrs['reduction']!r}")
        depth = indices.shape[-1] if indices.shape else None
        if not isinstance(depth, int) or depth > len(x.shape):
            raise ctx.fail("the last dim of indices must be static and at most the data rank")
        expected = indices.shape[:-1] + x.shape[depth:]
        if len(updates.shape) != len(expected):
            raise ctx.fail(f"updates shape {updates.shape} should be {expected}")
        for d, e in zip(updates.shape, expected):
            ctx.dims.same(d, e)
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, indices, updates, y = k.input(0), k.input(1), k.input(2), k.out
        depth = indices.dims[-1]
        expected = indices.dims[:-1] + x.dims[depth:]
        checks = [{"cond": f"{cexpr.lit(d)} != {cexpr.lit(e)}", "msg": c_string("ScatterND: updates shape is wrong")}
                  for d, e in zip(updates.dims, expected) if d != e]
        slice_size = cexpr.prod(x.dims[depth:])
        value = y.store(reduction_expr(node.attrs.get("reduction", "none"), y.dtype.load.format(f"{y.name}[t]"),
                                       updates.load("u"), y.dtype))
        return k.kernel("c/scatter_nd.c.j2", src=x.name, dst=y.name, indices=indices.name, ctype=y.ctype,
                        numel=cexpr.lit(y.numel), tuples=cexpr.lit(cexpr.prod(indices.dims[:-1])), depth=depth,
                        dims=[cexpr.lit(d) for d in x.dims[:depth]],
                        strides=[cexpr.lit(s) for s in x.strides[:depth]],
                        slice=cexpr.lit(slice_size), value=value, checks=checks)
