"""com.microsoft Inverse: the inverse of each square matrix (the c/inverse.c.j2 kernel)."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._contrib import MS, attributes
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("Inverse", since=1, domain=MS)
class Inverse(OpDef):
    """Y[..., :, :] = X[..., :, :]^-1, computed in double."""
    formal_inputs = ("X",)
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        attributes(node, {})
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, (dt.FLOAT, dt.DOUBLE, dt.FLOAT16), "X")
        if len(x.shape) < 2:
            raise ctx.fail(f"X must have at least 2 dims, got shape {list(x.shape)}")
        try:
            ctx.dims.same(x.shape[-2], x.shape[-1])
        except ShapeError:
            raise ctx.fail(f"X {list(x.shape)} is not a batch of square matrices") from None
        return [(x.dtype, tuple(x.shape))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        n = x.dims[-1]
        checks = []
        if x.dims[-2] != n:
            checks.append({"cond": f"{cexpr.lit(x.dims[-2])} != {cexpr.lit(n)}",
                           "msg": c_string("Inverse: the matrices are not square")})
        kernel = k.kernel("c/inverse.c.j2", checks=checks, X=x.name, Y=y.name, xt=x.ctype, yt=y.ctype,
                          n=cexpr.lit(n), batch=cexpr.lit(cexpr.prod(x.dims[:-2])),
                          load=x.dtype.load.format("xb[i]"), store=y.store(f"({y.compute})inv[i]"))
        kernel.scratch["work"] = cexpr.mul(n, n, 16)
        return kernel
