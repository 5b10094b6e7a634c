"""com.microsoft QGemm: onnxruntime's quantized Gemm, which its QDQ optimizer makes from
DequantizeLinear -> Gemm -> QuantizeLinear, and onnxc's fuse_qdq pass too."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.uses import fill
from .. import dtypes as dt
from ..ir import Node
from . import _cmsis_nn, _qgemm
from . import _quantize as qz
from ._elementwise import check_dtype
from .gemm import gemm_dims
from .qlinear_matmul import qgemm_direct
from .registry import InferContext, OpDef, register

INT8S = (dt.INT8, dt.UINT8)
MS = "com.microsoft"


@register("QGemm", since=1, domain=MS)
class QGemm(OpDef):
    """Y = alpha * (A' - a_zero_point) (B' - b_zero_point) * a_scale * b_scale + C * a_scale * b_scale,
    A' / B' optionally transposed, C an int32 bias; quantized with y_scale and y_zero_point
    (ties to even, saturated) when y_zero_point is given, else float32 (divided by y_scale
    when that is given), as onnxruntime computes it. b_scale and b_zero_point hold one value
    or one per column."""
    formal_inputs = ("A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point", "C", "y_scale", "y_zero_point")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(3)
        check_dtype(ctx, a.dtype, INT8S, "A")
        check_dtype(ctx, b.dtype, INT8S, "B")
        for name in node.attrs:
            if name not in ("alpha", "transA", "transB"):
                raise ctx.fail(f"unknown attribute {name!r} (QGemm has alpha, transA and transB)")
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ctx.fail(f"A {list(a.shape)} and B {list(b.shape)} must be matrices")
        m, ka = a.shape[::-1] if node.attrs.get("transA", 0) else a.shape
        kb, n = b.shape[::-1] if node.attrs.get("transB", 0) else b.shape
        ctx.dims.same(ka, kb)
        for i, want in ((1, dt.FLOAT), (2, a.dtype), (4, dt.FLOAT), (5, b.dtype), (6, dt.INT32), (7, dt.FLOAT)):
            if ctx.has(i) and ctx.inp(i).dtype != want:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} should be {want}")
        for i in (1, 2, 7, 8):
            if ctx.has(i) and not _one_value(ctx.inp(i).shape):
                raise ctx.fail(f"input {i} must hold one value, got shape {list(ctx.inp(i).shape)}")
        for i in (4, 5):
            s = ctx.inp(i).shape
            if not (_one_value(s) or (len(s) == 1 and (not isinstance(s[0], int) or s[0] in (1, n)))):
                raise ctx.fail(f"input {i} must hold one value or one per column ({n}), got shape {list(s)}")
        if tuple(ctx.inp(4).shape) != tuple(ctx.inp(5).shape):
            raise ctx.fail("b_scale and b_zero_point must have the same shape")
        if ctx.has(6):
            c = tuple(ctx.inp(6).shape)
            if not (_one_value(c) or c in ((n,), (1, n), (m, n))):
                raise ctx.fail(f"C {list(c)} must hold one value, one per column or one per output")
        if ctx.has(8):
            check_dtype(ctx, ctx.inp(8).dtype, INT8S, "y_zero_point")
            return [(ctx.inp(8).dtype, (m, n))]
        return [(dt.FLOAT, (m, n))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, y = k.input(0), k.input(3), k.out
        trans_a, trans_b = node.attrs.get("transA", 0), node.attrs.get("transB", 0)
        alpha = float(node.attrs.get("alpha", 1.0))
        b_scale = k.input(4)
        y_scale = k.input(7) if k.has_input(7) else None
        scale: Optional[qz.OutputScale] = None
        if k.has_input(8):
            scale = qz.output_scale(k, k.input(1), b_scale, divisor=y_scale, alpha=alpha)
        note = ""
        if k.target.cmsis_nn:   # (before the portable kernel's expressions name their tensors)
            cmsis, note = _cmsis_nn.fully_connected(node, k, scale)
            if cmsis is not None:
                return cmsis
        m, n, kk, checks = gemm_dims(node, a, b, y)
        column = "j" if b_scale.numel != 1 else "0"
        bias = "0"
        if k.has_input(6):
            c = k.input(6)
            index = "0" if c.numel == 1 else ("r * " + str(cexpr.lit(n)) + " + j" if c.rank == 2 and c.dims[0] != 1
                                             else "j")
            bias = f"(uint32_t){c.name}[{index}]"
        alpha_c = f"{float(np.float32(alpha))!r}f"
        # (written only where the scales are not constants: built without recording its names)
        runtime = fill("{} * {}[0] * {}[{}]", alpha_c, k.input(1).name, b_scale.name, column) \
            + (fill(" / {}[0]", y_scale.name) if y_scale is not None else "")
        if k.has_input(8):
            store = qz.requant("(int32_t)acc", y, f"{k.input(8).name}[0]", scale, column, runtime)
        else:
            float_scale = _output_scale(k, alpha, k.input(1), b_scale, y_scale)
            store = "(float)(int32_t)acc * " + (f"{float_scale}[{column}]" if float_scale else f"({runtime})")
        if k.target.int8_gemm:
            kernel = _qgemm.matmul_kernel(k, a, b, a_zero=f"(int32_t){k.input(2).name}[0]",
                                          b_zero=f"(int32_t){k.input(5).name}[{column}]",
                                          b_zero_count=b_scale.numel, y_store=store, bias=bias,
                                          trans_a=bool(trans_a), trans_b=bool(trans_b), checks=checks)
            kernel.helpers += qz.requant_helpers(scale)
            return kernel
        kernel = qgemm_direct(k, checks, m, n, kk,
                              f"kk * {cexpr.lit(m)} + r" if trans_a else f"r * {cexpr.lit(kk)} + kk",
                              f"j * {cexpr.lit(kk)} + kk" if trans_b else f"kk * {cexpr.lit(n)} + j",
                              f"{k.input(2).name}[0]", f"{k.input(5).name}[{column}]", bias, store)
        kernel.helpers += qz.requant_helpers(scale)
        kernel.note = note
        return kernel


def _one_value(shape) -> bool:
    return len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)


def _output_scale(k: KernelContext, alpha: float, a_scale, b_scale, y_scale):
    """Constant float32 output scales (alpha * a_scale * b_scale / y_scale, in that order), or None."""
    parts = [t for t in (a_scale, b_scale, y_scale) if t is not None]
    if any(t.value is None for t in parts):
        return None
    with np.errstate(all="ignore"):
        s = (np.float32(alpha) * np.asarray(a_scale.value, np.float32).reshape(-1)).astype(np.float32)
        s = (s * np.asarray(b_scale.value, np.float32).reshape(-1)).astype(np.float32)
        if y_scale is not None:
            s = (s / np.asarray(y_scale.value, np.float32).reshape(-1)).astype(np.float32)
    return k.constant("output_scale", s)
