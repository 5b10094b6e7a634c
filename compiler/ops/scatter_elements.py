from ...codegen import cexpr
from ...codegen.names import c_string
from ._indexing import check_elements_shapes, check_index_type, elements_data, norm_axis, reduction_expr
from .registry import OpDef, register

REDUCTIONS = ("none", "add", "mul", "max", "min")


class ScatterElementsBase(OpDef):
    """Y = X, then Y[i with its axis coordinate replaced by indices[i]] = updates[i] (or reduced into it)."""

    def infer(self, node, ctx):
        x, indices, updates = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        check_index_type(ctx, indices.dtype, "indices")
        if updates.dtype != x.dtype:
            raise ctx.fail(f"updates type {updates.dtype} differs from data type {x.dtype}")
        if node.attrs.get("reduction", "none") not in REDUCTIONS:
            raise ctx.fail(f"unknown reduction {node.attrs['reduction']!r}")
        axis = norm_axis(ctx, node.attrs.get("axis", 0), len(x.shape))
        check_elements_shapes(ctx, x.shape, indices.shape, axis)
        if len(updates.shape) != len(indices.shape):
            raise ctx.fail("updates and indices shapes differ")
        for d, e in zip(updates.shape, indices.shape):
            ctx.dims.same(d, e)
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, indices, updates, y = k.input(0), k.input(1), k.input(2), k.out
        axis = node.attrs.get("axis", 0) % x.rank
        data = elements_data(k, x, indices, axis, node.op_type)
        data["checks"] += [{"cond": f"{cexpr.lit(d)} != {cexpr.lit(e)}",
                            "msg": c_string(f"{node.op_type}: updates and indices shapes differ")}
                           for d, e in zip(updates.dims, indices.dims) if d != e]
        target = f"{y.name}[t]"
        value = y.store(reduction_expr(node.attrs.get("reduction", "none"), y.dtype.load.format(target),
                                       updates.load("o"), y.dtype))
        return k.kernel("c/scatter_elements.c.j2", src=x.name, dst=y.name, ctype=y.ctype, numel=cexpr.lit(y.numel),
                        value=value, range_error=c_string(f"{node.op_type}: index out of range"), **data)


@register("ScatterElements", since=11)
class ScatterElements(ScatterElementsBase):
    """Y = X with updates written (or reduced: add, mul, max, min) at the positions indices gives along axis."""


@register("Scatter", since=9)
class Scatter(ScatterElementsBase):
    """Deprecated ScatterElements without reduction."""
