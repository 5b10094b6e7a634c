from ...codegen import cexpr
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._indexing import check_index_type, const_ints, data_dims, norm_axis, vector_len
from .registry import OpDef, register


class SplitBase(OpDef):
    """Shared by every Split version: outputs are consecutive blocks along axis."""

    def sizes(self, node, ctx, dim) -> list:
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        axis = norm_axis(ctx, node.attrs.get("axis", 0), len(x.shape))
        sizes = self.sizes(node, ctx, x.shape[axis])
        if len(sizes) != len(node.outputs):
            raise ctx.fail(f"split gives {len(sizes)} parts for {len(node.outputs)} outputs")
        if all(isinstance(s, int) for s in sizes) and isinstance(x.shape[axis], int) \
                and sum(sizes) != x.shape[axis]:
            raise ctx.fail(f"split {sizes} does not add up to dim {x.shape[axis]}")
        return [(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]

    def lower(self, node, k):
        x = k.input(0)
        axis = node.attrs.get("axis", 0) % x.rank
        inner = cexpr.prod(x.dims[axis + 1:])
        parts, offset = [], 0
        for y in k.outputs:
            block = cexpr.mul(y.dims[axis], inner)
            parts.append({"name": y.name, "block": cexpr.lit(block), "offset": cexpr.lit(offset)})
            offset = cexpr.add(offset, block)
        checks = []
        if x.dims[axis] != cexpr.add(*[y.dims[axis] for y in k.outputs]) and not k.data_dims:
            # Equal parts of a symbolic dim: it must divide evenly.
            total = cexpr.add(*[y.dims[axis] for y in k.outputs])
            checks.append({"cond": f"{cexpr.lit(total)} != {cexpr.lit(x.dims[axis])}",
                           "msg": c_string(f"{node.op_type}: the parts do not add up to the split dim")})
        kernel = k.kernel("c/split.c.j2", src=x.name, ctype=x.ctype, outer=cexpr.lit(cexpr.prod(x.dims[:axis])),
                          in_block=cexpr.lit(cexpr.mul(x.dims[axis], inner)), parts=parts, checks=checks)
        if k.data_dims:
            kernel.shape_template = "c/split_shape.c.j2"
            kernel.shape_data = {"dim": cexpr.lit(x.dims[axis]), "split": k.input(1).name}
        return kernel


def equal_parts(ctx, dim, n: int) -> list:
    if isinstance(dim, int) and dim % n:
        raise ctx.fail(f"dim {dim} does not split into {n} equal parts")
    return [ctx.dims.floordiv(dim, n)] * n


@register("Split", since=1, until=1)
class Split1(SplitBase):
    """Y_i = consecutive parts of X along axis (0 when absent, as from Split-2 on), sized by
    the split attribute or the optional split input (never both; default: equal parts).
    The split input has X's float type, as the schema says, or int64."""

    def sizes(self, node, ctx, dim):
        n = len(node.outputs)
        if not ctx.has(1):
            split = node.attrs.get("split")
            return list(split) if split else equal_parts(ctx, dim, n)
        if node.attrs.get("split"):
            raise ctx.fail("split is given both as an attribute and as an input")
        if ctx.inp(1).dtype not in (ctx.inp(0).dtype, dt.INT64):
            raise ctx.fail(f"split must be {ctx.inp(0).dtype} or int64, got {ctx.inp(1).dtype}")
        if vector_len(ctx, 1, "split") != n:
            raise ctx.fail(f"split has {ctx.inp(1).shape[0]} entries for {n} outputs")
        value = ctx.const(1)
        if value is None:
            if ctx.inp(1).dtype != dt.INT64:
                raise UnsupportedError(f"{node.label}: a float split input must be a constant")
            return data_dims(ctx, node, n)
        sizes = [int(v) for v in value.reshape(-1)]
        if any(s < 0 or s != v for s, v in zip(sizes, value.reshape(-1))):
            raise ctx.fail(f"split {value.tolist()} must hold non-negative whole numbers")
        return sizes


@register("Split", since=2, until=12)
class Split2(SplitBase):
    """Y_i = consecutive parts of X along axis, sized by the split attribute (default: equal)."""

    def sizes(self, node, ctx, dim):
        split = node.attrs.get("split")
        return list(split) if split else equal_parts(ctx, dim, len(node.outputs))


@register("Split", since=13)
class Split(SplitBase):
    """Y_i = consecutive parts of X along axis, sized by the split input, or num_outputs parts (opset 18)."""

    def sizes(self, node, ctx, dim):
        n = len(node.outputs)
        if ctx.has(1):
            if "num_outputs" in node.attrs:
                raise ctx.fail("split and num_outputs are both given")
            check_index_type(ctx, ctx.inp(1).dtype, "split", (dt.INT64,))
            sizes = const_ints(ctx, 1)
            if sizes is None:
                if vector_len(ctx, 1, "split") != n:
                    raise ctx.fail(f"split has {ctx.inp(1).shape[0]} entries for {n} outputs")
                return data_dims(ctx, node, n)
            if any(s < 0 for s in sizes):
                raise ctx.fail(f"split {sizes} has a negative size")
            return sizes
        if "num_outputs" not in node.attrs:
            return equal_parts(ctx, dim, n)
        if node.attrs["num_outputs"] != n:
            raise ctx.fail(f"num_outputs is {node.attrs['num_outputs']} but the node has {n} outputs")
        part = ctx.dims.ceildiv(dim, n)  # the last part takes what is left
        return [part] * (n - 1) + [ctx.dims.sub(dim, ctx.dims.mul(part, n - 1))]
