import numpy as np

from ...codegen import cexpr
from ..dims import num_elements
from ._indexing import norm_axis
from .registry import OpDef, register


@register("Concat", since=1)
class Concat(OpDef):
    """Y = the inputs joined along axis."""

    def infer(self, node, ctx):
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        rank = len(xs[0].shape)
        axis = norm_axis(ctx, node.attrs.get("axis", 1), rank)
        out = list(xs[0].shape)
        for x in xs[1:]:
            if x.dtype != xs[0].dtype:
                raise ctx.fail(f"input types differ: {xs[0].dtype} and {x.dtype}")
            if len(x.shape) != rank:
                raise ctx.fail(f"input ranks differ: {rank} and {len(x.shape)}")
            for a, d in enumerate(x.shape):
                out[a] = ctx.dims.add(out[a], d) if a == axis else ctx.dims.same(out[a], d)
        return [(xs[0].dtype, tuple(out))]

    def dims_value(self, node, ctx):
        parts = [ctx.sym_array(i) for i in range(len(node.inputs))]
        if any(p is None for p in parts):
            return None
        return np.concatenate(parts, axis=node.attrs.get("axis", 1) % parts[0].ndim)

    def input_views(self, node):
        # with nothing before the axis but ones, each input is one block of the output
        y = node.outputs[0]
        axis = node.attrs.get("axis", 1) % len(y.shape)
        if not all(v.static for v in (y, *node.inputs)) or any(d != 1 for d in y.shape[:axis]):
            return []
        views, offset = [], 0
        for i, x in enumerate(node.inputs):
            views.append((i, offset))
            offset += num_elements(x.shape) * x.dtype.itemsize
        return views

    def lower(self, node, k):
        y = k.out
        axis = node.attrs.get("axis", 1) % y.rank
        inner = cexpr.prod(y.dims[axis + 1:])
        parts, offset = [], 0
        for i in range(len(node.inputs)):
            x = k.input(i)
            block = cexpr.mul(x.dims[axis], inner)
            parts.append({"name": x.name, "block": cexpr.lit(block), "offset": cexpr.lit(offset)})
            offset = cexpr.add(offset, block)
        return k.kernel("c/concat.c.j2", out=y.name, ctype=y.ctype, outer=cexpr.lit(cexpr.prod(y.dims[:axis])),
                        out_block=cexpr.lit(offset), parts=parts)
