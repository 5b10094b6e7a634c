from __future__ import annotations

from dataclasses import replace

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from ...codegen.uses import fill
from .. import dtypes as dt
from ..ir import Node
from . import _cmsis_nn
from . import _gemm
from . import _qgemm
from . import _quantize as qz
from ._elementwise import check_dtype
from .mat_mul import matmul_kernel, matmul_shape
from .registry import InferContext, OpDef, register

INT8S = (dt.INT8, dt.UINT8)


@register("QLinearMatMul", since=10)
class QLinearMatMul(OpDef):
    """y = quantize((a - a_zero_point) @ (b - b_zero_point) * a_scale * b_scale / y_scale), per-tensor."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(3)
        check_dtype(ctx, a.dtype, INT8S, "a")
        check_dtype(ctx, b.dtype, INT8S, "b")
        check_dtype(ctx, ctx.inp(7).dtype, INT8S, "y_zero_point")
        scale_types = qz.FLOAT_TYPES if node.version >= 21 else (dt.FLOAT,)
        for i, ref in ((1, None), (2, a), (4, None), (5, b), (6, None), (7, None)):
            v = ctx.inp(i)
            if ref is None and i != 7:
                check_dtype(ctx, v.dtype, scale_types, f"input {i}")
                if v.dtype != ctx.inp(1).dtype:
                    raise ctx.fail(f"input {i} type {v.dtype} differs from a_scale type {ctx.inp(1).dtype}")
            elif ref is not None and v.dtype != ref.dtype:
                raise ctx.fail(f"input {i} type {v.dtype} differs from {ref.dtype}")
            if len(v.shape) > 1 or (v.shape and isinstance(v.shape[0], int) and v.shape[0] != 1):
                raise ctx.fail(f"input {i} must hold one value (per-tensor quantization), got shape {list(v.shape)}")
        return [(ctx.inp(7).dtype, matmul_shape(ctx, a.shape, b.shape))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, y = k.input(0), k.input(3), k.out
        params = [k.input(i) for i in (1, 2, 4, 5, 6, 7)]
        a_scale, a_zero, b_scale, b_zero, y_scale, y_zero = params
        checks = [{"cond": f"{cexpr.lit(p.numel)} != 1",
                   "msg": c_string(f"QLinearMatMul: {p.name} must hold one value")}
                  for p in params if not isinstance(p.numel, int)]
        ts = a_scale.dtype
        # (the scales are parameters only where the multiplier is not a compile-time constant)
        product = qz.round_to(fill("{} * {}", a_scale.load("0"), b_scale.load("0")), ts)
        multiplier = qz.round_to(fill("{} / {}", product, y_scale.load("0")), ts)
        scale = qz.output_scale(k, a_scale, b_scale, divisor=y_scale)
        note = ""
        if k.target.cmsis_nn:
            cmsis, note = _cmsis_nn.fully_connected(node, k, scale)
            if cmsis is not None:
                return cmsis
        if k.target.integer_only and b.rank <= 2:
            rows = cexpr.prod(a.dims[:-1])
            kk = a.dims[-1]
            n = b.dims[-1] if b.rank == 2 else 1
            if kk != b.dims[0]:
                checks.append({"cond": f"{cexpr.lit(kk)} != {cexpr.lit(b.dims[0])}",
                               "msg": c_string("QLinearMatMul: the inner dims of A and B differ")})
            kernel = qgemm_direct(k, checks, rows, n, kk, f"r * {cexpr.lit(kk)} + kk", f"kk * {cexpr.lit(n)} + j",
                                  f"{a_zero.name}[0]", f"{b_zero.name}[0]", "0",
                                  qz.requant("(int32_t)acc", y, f"{y_zero.name}[0]", scale, "0", multiplier))
            kernel.helpers += qz.requant_helpers(scale)
            kernel.note = note
            return kernel
        if k.target.int8_gemm:
            kernel = _qgemm.matmul_kernel(k, a, b, a_zero=f"(int32_t){a_zero.name}[0]",
                                          b_zero=f"(int32_t){b_zero.name}[0]", b_zero_count=1, checks=checks,
                                          y_store=qz.requant("(int32_t)acc", y, f"{y_zero.name}[0]", scale, "0",
                                                             multiplier))
            kernel.helpers += qz.requant_helpers(scale) + [qz.ROUND_HELPER]
            return kernel
        requant = qz.requant("(int32_t)y[i]", y, f"{y_zero.name}[0]", scale, "0", multiplier)
        # The matmul kernel's locals are named a, b and y like the spec's tensors: it runs in
        # a block of its own on aliases of them.
        qa, qb, qy = replace(a, name="qa"), replace(b, name="qb"), replace(y, name="qy")
        operands = KernelContext(node, [qa, qb], [qy], k.dim, k.data_dims, k.target, k.uses)
        operands.constants = k.constants
        kernel = matmul_kernel(
            operands, _gemm.UINT32,
            a_load=f"(uint32_t)((int32_t){qa.name}[row * {{K}} + k] - (int32_t){a_zero.name}[0])",
            b_load=f"(uint32_t)((int32_t){qb.name}[i] - (int32_t){b_zero.name}[0])",
            y_store=requant, checks=checks)
        kernel.template = "c/qlinear_matmul.c.j2"
        kernel.data["aliases"] = [{"const": "const " if t is not y else "", "ctype": t.ctype, "alias": q.name,
                                   "name": t.name} for t, q in ((a, qa), (b, qb), (y, qy))]
        kernel.helpers += qz.requant_helpers(scale) + [qz.ROUND_HELPER]
        kernel.note = note
        return kernel


def qgemm_direct(k: KernelContext, checks: list, rows: CExpr, n: CExpr, kk: CExpr, a_index: str, b_index: str,
                 a_zero: str, b_zero: str, bias: str, y_store: str) -> Kernel:
    """The integer-only quantized matrix product (c/qgemm_direct.c.j2) of A (input 0) by B
    (input 3) into the output; indices and zero points are C expressions of r, j and kk."""
    return k.kernel("c/qgemm_direct.c.j2", checks=checks, ROWS=cexpr.lit(rows), N=cexpr.lit(n), K=cexpr.lit(kk),
                    a=k.input(0).name, b=k.input(3).name, y=k.out.name, a_index=a_index, b_index=b_index,
                    a_zero=a_zero, b_zero=b_zero, bias=bias, y_store=y_store)
