from ...codegen import cexpr
from ...codegen.names import c_string
from .. import dtypes as dt
from ._reduce import check_type, normalize_axis, split_at
from .registry import OpDef, register


class TopKBase(OpDef):
    """Values, Indices = the k largest (or smallest) elements along axis, best first; ties by lower index."""

    def k_value(self, node, ctx):
        """k when known while compiling, else None."""
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, dt.NUMERIC)
        if len(x.shape) == 0:
            raise ctx.fail("input must have rank >= 1")
        axis = normalize_axis(ctx, node.attrs.get("axis", -1), len(x.shape))
        k = self.k_value(node, ctx)
        if k is None:
            k = ctx.dims.data(node.name or node.op_type)
        elif k < 0 or (isinstance(x.shape[axis], int) and k > x.shape[axis]):
            raise ctx.fail(f"k = {k} is out of range for axis {axis} of size {x.shape[axis]}")
        shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        return [(x.dtype, shape), (dt.INT64, shape)]

    def lower(self, node, k):
        x, values, indices = k.input(0), k.outputs[0], k.outputs[1]
        axis = node.attrs.get("axis", -1) % x.rank
        outer, n, inner = split_at(x.dims, axis)
        count = values.dims[axis]
        has_k = k.has_input(1)
        kernel = k.kernel("c/top_k.c.j2", X=x.name, values=values.name, indices=indices.name,
                          K=k.input(1).name if has_k else None, consumed=has_k and not k.data_dims,
                          load=x.load("{}"), largest=int(node.attrs.get("largest", 1)),
                          float=x.dtype.is_float, outer=cexpr.lit(outer), n=cexpr.lit(n), inner=cexpr.lit(inner),
                          k=cexpr.lit(count), check_k=not isinstance(n, int) and not k.data_dims,
                          err_k=c_string(f"{node.op_type}: k is larger than the axis"))
        kernel.scratch = {"heap": cexpr.mul(8, count)}
        if k.data_dims:
            kernel.shape_template = "c/top_k_shape.c.j2"
            kernel.shape_data = {"K": k.input(1).name, "n": cexpr.lit(n), "err_k": c_string(
                f"{node.op_type}: k is out of range for the axis")}
        return kernel


@register("TopK", since=1, until=9)
class TopK1(TopKBase):
    """TopK with k as an attribute (largest first)."""

    def k_value(self, node, ctx):
        return int(node.attrs["k"])


@register("TopK", since=10)
class TopK(TopKBase):
    """TopK with k as a 1-D int64 input (largest/sorted attributes from opset 11)."""

    def k_value(self, node, ctx):
        kt = ctx.inp(1)
        if kt.dtype != dt.INT64 or kt.shape not in ((1,), ()):
            raise ctx.fail("K must be a 1-D int64 tensor with one element")
        value = ctx.const(1)
        return None if value is None else int(value.reshape(-1)[0])
