from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("Det", since=11)
class Det(OpDef):
    """Y[...] = determinant of each square matrix X[..., :, :]."""

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        if len(x.shape) < 2:
            raise ctx.fail(f"X must have at least 2 dims, got shape {list(x.shape)}")
        try:
            ctx.dims.same(x.shape[-2], x.shape[-1])
        except ShapeError:
            raise ctx.fail(f"X {list(x.shape)} is not a batch of square matrices") from None
        return [(x.dtype, tuple(x.shape[:-2]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        n = x.dims[-1]
        checks = []
        if x.dims[-2] != n:
            checks.append({"cond": f"{cexpr.lit(x.dims[-2])} != {cexpr.lit(n)}",
                           "msg": c_string("Det: the matrices are not square")})
        kernel = k.kernel("c/det.c.j2", checks=checks, X=x.name, Y=y.name, xt=x.ctype,
                          n=cexpr.lit(n), batch=cexpr.lit(y.numel), load=x.dtype.load.format("xb[i]"),
                          store=y.store(f"({y.compute})det"))
        kernel.scratch["lu"] = cexpr.mul(n, n, 8)
        return kernel
