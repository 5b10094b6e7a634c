from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import RankKnownAtRunTime
from ._copy import Copy
from ._dims_value import passthrough
from .registry import register


@register("Reshape", since=1, until=4)
class Reshape1(Copy):
    """Y = X with the shape attribute; 0 copies a dim, -1 is inferred."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x = ctx.inp(0)
        if "shape" not in node.attrs:
            raise ctx.fail("the shape attribute is required")
        return [(x.dtype, resolve_shape(ctx, x.shape, list(node.attrs["shape"]), 0))]


@register("Reshape", since=5)
class Reshape(Copy):
    """Y = X with a new shape; 0 copies a dim (unless allowzero), -1 is inferred."""
    dims_value = staticmethod(passthrough)


    def infer(self, node, ctx):
        x, shape = ctx.inp(0), ctx.inp(1)
        if shape.dtype != dt.INT64 or len(shape.shape) != 1:
            raise ctx.fail("shape must be a 1-D int64 tensor")
        if not isinstance(shape.shape[0], int):
            raise RankKnownAtRunTime(f"{node.label}: the length of shape, the output's rank, is known only at "
                                     "run time")
        allowzero = node.attrs.get("allowzero", 0)
        target = ctx.sym_value(1)
        if target is None:
            return [(x.dtype, tuple(ctx.dims.data(node.name or "Reshape") for _ in range(shape.shape[0])))]
        return [(x.dtype, resolve_shape(ctx, x.shape, list(target), allowzero))]

    def lower(self, node, k):
        kernel = super().lower(node, k)
        if k.data_dims:
            x = k.input(0)
            kernel.shape_template = "c/reshape_shape.c.j2"
            kernel.shape_data = {"in_dims": [cexpr.lit(d) for d in x.dims], "in_numel": cexpr.lit(x.numel),
                                 "allowzero": int(node.attrs.get("allowzero", 0)),
                                 "shape": k.input(1).name}
        return kernel


def resolve_shape(ctx, in_shape, target, allowzero):
    """Static-length target with known values -> output dims (symbolic-aware)."""
    out, infer_at = [], None
    for i, v in enumerate(target):
        if isinstance(v, str):  # a symbolic dim taken from shape data
            out.append(v)
        elif v == 0 and not allowzero:
            if i >= len(in_shape):
                raise ctx.fail(f"shape[{i}] = 0 copies a dim the input does not have")
            out.append(in_shape[i])
        elif v == -1:
            if infer_at is not None:
                raise ctx.fail("shape has more than one -1")
            infer_at = i
            out.append(None)
        elif v < -1:
            raise ctx.fail(f"shape[{i}] = {v} is invalid")
        else:
            out.append(v)
    total = ctx.dims.product(in_shape)
    if infer_at is not None:
        known = ctx.dims.product(d for d in out if d is not None)
        if isinstance(total, int) and isinstance(known, int):
            if known == 0 or total % known:
                raise ctx.fail(f"cannot reshape {in_shape} to {target}")
            out[infer_at] = total // known
        else:
            out[infer_at] = _divide_exactly(ctx, total, known)
    elif isinstance(total, int) and all(isinstance(d, int) for d in out):
        count = 1
        for d in out:
            count *= d
        if count != total:
            raise ctx.fail(f"cannot reshape {in_shape} ({total} elements) to {target}")
    return tuple(out)


def _divide_exactly(ctx, total, known):
    return ctx.dims.floordiv(total, known)
