from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _gemm
from . import _qgemm
from ._conv_pool import conv_shape
from ._elementwise import check_dtype
from .conv import conv_kernel
from .registry import InferContext, OpDef, register

INT8S = (dt.INT8, dt.UINT8)


@register("ConvInteger", since=10)
class ConvInteger(OpDef):
    """y = conv(x - x_zero_point, w - w_zero_point) in int32."""

    def infer(self, node: Node, ctx: InferContext):
        x, w = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, INT8S, "x")
        check_dtype(ctx, w.dtype, INT8S, "w")
        for i, ref in ((2, x), (3, w)):
            if ctx.has(i) and ctx.inp(i).dtype != ref.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from {ref.dtype}")
        if ctx.has(2):
            zp = ctx.inp(2).shape
            if len(zp) > 1 or (zp and isinstance(zp[0], int) and zp[0] != 1):
                raise ctx.fail(f"x_zero_point must be a scalar, got shape {list(zp)}")
        shape = conv_shape(node, ctx.dims, x.shape, w.shape, ctx.fail)
        if ctx.has(3) and len(ctx.inp(3).shape) > 1:
            raise ctx.fail("w_zero_point must be a scalar or a vector of the output channels")
        return [(dt.INT32, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        w = k.input(1)
        checks = []
        x_zero = "0"
        if k.has_input(2):
            zp = k.input(2)
            if zp.numel != 1:
                checks.append({"cond": f"{cexpr.lit(zp.numel)} != 1",
                               "msg": c_string("ConvInteger: x_zero_point must have one value")})
            x_zero = f"(int32_t){zp.name}[0]"
        w_zero = "0"
        if k.has_input(3):
            zp = k.input(3)
            if zp.rank == 1 and zp.dims[0] != 1:
                checks.append({"cond": f"{cexpr.lit(zp.dims[0])} != {cexpr.lit(w.dims[0])}",
                               "msg": c_string("ConvInteger: w_zero_point must have one value per output channel")})
                w_zero = f"(int32_t){zp.name}[m]"
            else:
                w_zero = f"(int32_t){zp.name}[0]"
        if k.target.int8_gemm:
            kernel = _qgemm.conv_kernel(node, k, x_zero=x_zero, w_zero=w_zero, bias="0", y_store=None, checks=checks)
            if kernel is not None:
                return kernel
        return conv_kernel(node, k, _gemm.UINT32, x_load=f"(uint32_t)((int32_t){{}} - {x_zero})", x_native=False,
                           w_load=f"(uint32_t)((int32_t){w.name}[m * {{K}} + i] - {w_zero})", bias="0",
                           y_store=None, checks=checks)
