from __future__ import annotations

from typing import Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from . import _gemm
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register

TYPES = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16, dt.BFLOAT16, dt.INT32, dt.INT64, dt.UINT32, dt.UINT64)


@register("Gemm", since=1)
class Gemm(OpDef):
    """Y = alpha * A' B' + beta * C, A' / B' optionally transposed, C broadcast to (M, N)."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, a.dtype, TYPES, "A")
        for i in (1, 2):
            if ctx.has(i) and ctx.inp(i).dtype != a.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from A type {a.dtype}")
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ctx.fail(f"A {list(a.shape)} and B {list(b.shape)} must be matrices")
        m, ka = a.shape[::-1] if node.attrs.get("transA", 0) else a.shape
        kb, n = b.shape[::-1] if node.attrs.get("transB", 0) else b.shape
        try:
            ctx.dims.same(ka, kb)
        except ShapeError as e:
            raise ctx.fail(f"inner dims of A and B: {e}") from None
        if ctx.has(2):
            c = ctx.inp(2).shape
            padded = (1,) * (2 - len(c)) + tuple(c)
            if len(c) > 2 or any(isinstance(d, int) and isinstance(t, int) and d not in (1, t)
                                 for d, t in zip(padded, (m, n))):
                raise ctx.fail(f"C {list(c)} does not broadcast to ({m}, {n})")
        if a.dtype.is_int and not all(float(node.attrs.get(x, 1.0)).is_integer() for x in ("alpha", "beta")):
            raise ctx.fail("alpha and beta must be integers for integer types")
        return [(a.dtype, (m, n))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, y = k.input(0), k.input(1), k.out
        g = _gemm.gemm_type(a.dtype)
        native = _gemm.native(a.dtype)
        trans_a, trans_b = node.attrs.get("transA", 0), node.attrs.get("transB", 0)
        m, n, kk, checks = gemm_dims(node, a, b, y)
        cast = "" if g.ctype == a.ctype else f"(const {g.ctype} *)"
        data = {
            "checks": checks, "ct": g.ctype, "gemm": g.fn,
            "M": cexpr.lit(m), "N": cexpr.lit(n), "K": cexpr.lit(kk),
            "rsa": 1 if trans_a else cexpr.lit(kk), "csa": cexpr.lit(m) if trans_a else 1,
            "rsb": 1 if trans_b else cexpr.lit(n), "csb": cexpr.lit(kk) if trans_b else 1,
            "a_load": None if native else a.load("i"), "a_ptr": cast + a.name,
            "b_load": None if native else b.load("i"), "b_ptr": cast + b.name,
            "y_store": None if native else y.store("{}"), "y_name": y.name,
            "y_ptr": y.name if g.ctype == y.ctype else f"({g.ctype} *){y.name}",
            "epilogue": self.epilogue(node, k, g, checks),
        }
        data["sgemm"] = self.sgemm_data(node, k) if native and g is _gemm.FLOAT else None
        kernel = k.kernel("c/gemm.c.j2", helpers=g.helpers, **data)
        if not native:
            kernel.scratch["a"] = cexpr.mul(a.numel, g.size)
            kernel.scratch["b"] = cexpr.mul(b.numel, g.size)
            kernel.scratch["acc"] = cexpr.mul(y.numel, g.size)
        packed_b = bool(data["sgemm"] and data["sgemm"]["packed"])
        kernel.scratch["pack"] = _gemm.pack_bytes(g, m, n, kk, few_rows_unpacked=not (trans_a and trans_b) or packed_b,
                                                  target=k.target)
        return kernel

    @staticmethod
    def sgemm_data(node: Node, k: KernelContext) -> Optional[dict]:
        """float32 through onnxc_sgemm when alpha is 1 and beta * C is nothing, a bias per
        column or row, or a full (M, N) addend: that goes to the epilogue, and a constant B is
        packed at compile time. None: the general path."""
        b, y = k.input(1), k.out
        alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
        if alpha != 1 or (k.has_input(2) and beta not in (0, 1)):
            return None
        epi = {"row_bias": "NULL", "col_bias": "NULL", "residual": "NULL"}
        if k.has_input(2) and beta == 1:
            c = k.input(2)
            dims = [1] * (2 - c.rank) + list(c.dims)
            if dims == [1, y.dims[1]]:
                epi["col_bias"] = c.name
            elif dims == [y.dims[0], 1]:
                epi["row_bias"] = c.name
            elif dims == list(y.dims):
                epi["residual"] = c.name
            else:
                return None
        packed = None
        if k.target.prepack and b.value is not None and not _weights_as_they_are(node, k):
            matrix = np.asarray(b.value, np.float32)
            packed = k.constant("B_packed", _gemm.pack_cols(matrix.T if node.attrs.get("transB", 0) else matrix,
                                                            k.target.gemm_nr))
        return {"packed": packed, "epi": epi}

    def epilogue(self, node: Node, k: KernelContext, g: _gemm.GemmType, checks: list) -> str:
        """alpha * v + beta * C[i, j] in the GEMM type, dropping neutral terms (v = A' B' at i, j)."""
        alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
        expr = "v" if alpha == 1 else f"{_literal(alpha, g)} * v"
        if not k.has_input(2) or beta == 0:
            return expr
        c = k.input(2)
        value = c.load(_broadcast_index(c, k.out, checks))
        if g.ctype != c.compute:
            value = f"({g.ctype}){value}"
        return f"{expr} + {value}" if beta == 1 else f"{expr} + {_literal(beta, g)} * {value}"


# A Linear layer's weights (B transposed) of at least this many bytes, against fewer rows than
# _gemm.FEW_ROWS known when compiling, are read as they are rather than packed: the product
# streams them from memory either way, and onnxc_sgemm_few_rows's dot products of contiguous
# columns run as fast as the packed panels there (VGG-19's 4096 x 25088 classifier at 1 and 2
# threads: 0.79 of the packed time; 2048 x 1000 and 4096 x 4096: 0.96-1.01), while packing VGG's
# 500 MB takes a compile 1.5 s and as much memory again. Smaller weights stay in cache between
# runs, where the packed panels are faster at 2 threads (768 x 768: 0.012 ms, as they are 0.020).
AS_IS_BYTES = 4 << 20


def _weights_as_they_are(node: Node, k: KernelContext) -> bool:
    rows = k.out.dims[0]
    return bool(node.attrs.get("transB", 0)) and not node.attrs.get("transA", 0) and isinstance(rows, int) \
        and rows < _gemm.FEW_ROWS and k.input(1).value.nbytes >= AS_IS_BYTES and k.target.precision == "fp32"


def gemm_dims(node: Node, a: TensorRef, b: TensorRef, y: TensorRef) -> tuple[CExpr, CExpr, CExpr, list]:
    """M, N and K of a Gemm-like node (A and B transposed by transA / transB), and the run-time
    check that A's and B's inner dims agree."""
    trans_a, trans_b = node.attrs.get("transA", 0), node.attrs.get("transB", 0)
    m, n = y.dims
    kk = a.dims[0] if trans_a else a.dims[1]
    kb = b.dims[1] if trans_b else b.dims[0]
    checks = []
    if kk != kb:
        checks.append({"cond": f"{cexpr.lit(kk)} != {cexpr.lit(kb)}",
                       "msg": c_string(f"{node.op_type}: the inner dims of A and B differ")})
    return m, n, kk, checks


def _literal(x: float, g: _gemm.GemmType) -> str:
    if g.name == "float":
        return f"{x!r}f"
    if g.name == "double":
        return repr(x)
    return f"({g.ctype}){int(x)}"


def _broadcast_index(c: TensorRef, y: TensorRef, checks: list) -> str:
    """Index of C[i, j] broadcast unidirectionally to Y (M, N)."""
    dims = [1] * (2 - c.rank) + list(c.dims)
    terms = []
    for var, d, target, stride in zip("ij", dims, y.dims, (dims[1], 1)):
        if d == 1:
            continue
        if d != target:
            checks.append({"cond": f"{cexpr.lit(d)} != 1 && {cexpr.lit(d)} != {cexpr.lit(target)}",
                           "msg": c_string("Gemm: C does not broadcast to the output")})
            terms.append(f"({d} == 1 ? 0 : {var} * {cexpr.lit(stride)})")
        else:
            terms.append(var if stride == 1 else f"{var} * {cexpr.lit(stride)}")
    return " + ".join(terms) or "0"
