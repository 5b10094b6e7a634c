from __future__ import annotations

from typing import Optional

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _gemm
from . import _qgemm
from ._elementwise import check_dtype
from .mat_mul import matmul_kernel, matmul_shape
from .registry import InferContext, OpDef, register

INT8S = (dt.INT8, dt.UINT8)


@register("MatMulInteger", since=10)
class MatMulInteger(OpDef):
    """Y = (A - a_zero_point) @ (B - b_zero_point) in int32, numpy matmul semantics."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, a.dtype, INT8S, "A")
        check_dtype(ctx, b.dtype, INT8S, "B")
        for i, ref in ((2, a), (3, b)):
            if ctx.has(i) and ctx.inp(i).dtype != ref.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from {ref.dtype}")
        if ctx.has(2) and _zero_point_kind(ctx.inp(2).shape, a.shape, row=True) is None:
            raise ctx.fail(f"a_zero_point shape {list(ctx.inp(2).shape)} is neither a scalar nor one per row of A")
        if ctx.has(3) and _zero_point_kind(ctx.inp(3).shape, b.shape, row=False) is None:
            raise ctx.fail(f"b_zero_point shape {list(ctx.inp(3).shape)} is neither a scalar nor one per column of B")
        return [(dt.INT32, matmul_shape(ctx, a.shape, b.shape))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b = k.input(0), k.input(1)
        if k.target.int8_gemm:
            kernel = self.int8_gemm(k)
            if kernel is not None:
                return kernel
        a_zero = b_zero = "0"
        if k.has_input(2):
            zp = k.input(2)
            m = a.dims[-2] if a.rank > 1 else 1
            index = {"scalar": "0", "vector": f"row % {cexpr.lit(m)}", "full": "row"}[
                _zero_point_kind(zp.shape, a.shape, row=True)]
            a_zero = f"(int32_t){zp.name}[{index}]"
        if k.has_input(3):
            zp = k.input(3)
            n = b.dims[-1] if b.rank > 1 else 1
            index = {"scalar": "0", "vector": "n", "full": f"bb * {cexpr.lit(n)} + n"}[
                _zero_point_kind(zp.shape, b.shape, row=False)]
            b_zero = f"(int32_t){zp.name}[{index}]"
        return matmul_kernel(k, _gemm.UINT32, a_load=f"(uint32_t)((int32_t){a.name}[row * {{K}} + k] - {a_zero})",
                             b_load=f"(uint32_t)((int32_t){b.name}[i] - {b_zero})", y_store=None)


    @staticmethod
    def int8_gemm(k: KernelContext) -> Optional[Kernel]:
        """The 8-bit GEMM's kernel (compiler/ops/_qgemm.py), or None for zero points per row of A
        or per batch, which it does not take."""
        a, b = k.input(0), k.input(1)
        a_zero, b_zero, count = "0", "0", 1
        if k.has_input(2):
            zp = k.input(2)
            if _zero_point_kind(zp.shape, a.shape, row=True) != "scalar":
                return None
            a_zero = f"(int32_t){zp.name}[0]"
        if k.has_input(3):
            zp = k.input(3)
            kind = _zero_point_kind(zp.shape, b.shape, row=False)
            if kind == "full":
                return None
            count = 1 if kind == "scalar" else zp.dims[0]
            b_zero = f"(int32_t){zp.name}[{'0' if kind == 'scalar' else 'j'}]"
        return _qgemm.matmul_kernel(k, a, b, a_zero=a_zero, b_zero=b_zero, b_zero_count=count, y_store=None)


def _zero_point_kind(zp: tuple, x: tuple, row: bool):
    """'scalar', 'vector' (one per row of A / column of B), 'full' (per batch too) or None."""
    if all(d == 1 for d in zp):
        return "scalar"
    along = (x[-2] if len(x) > 1 else 1) if row else (x[-1] if len(x) > 1 else 1)
    if zp == (along,):
        return "vector"
    if len(x) > 1 and len(zp) == len(x):
        full = x[:-1] + (1,) if row else x[:-2] + (1, x[-1])
        if zp == full:
            return "full"
    return None
