from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..dims import broadcast_shapes
from ..errors import ShapeError
from ..ir import Node
from . import _gemm
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register

TYPES = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16, dt.BFLOAT16, dt.INT32, dt.INT64, dt.UINT32, dt.UINT64)


@register("MatMul", since=1)
class MatMul(OpDef):
    """Y = A @ B with numpy semantics (1-D operands promoted, batch axes broadcast)."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, a.dtype, TYPES, "A")
        if b.dtype != a.dtype:
            raise ctx.fail(f"B type {b.dtype} differs from A type {a.dtype}")
        return [(a.dtype, matmul_shape(ctx, a.shape, b.shape))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b = k.input(0), k.input(1)
        native = _gemm.native(a.dtype)
        return matmul_kernel(k, _gemm.gemm_type(a.dtype),
                             a_load=None if native else a.load("row * {K} + k"),
                             b_load=None if native else b.load("i"),
                             y_store=None if native else k.out.store("y[i]"))


def matmul_shape(ctx: InferContext, a: tuple, b: tuple) -> tuple:
    """numpy matmul output shape (symbolic-aware)."""
    if not a or not b:
        raise ctx.fail("MatMul operands must have at least one dimension")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    try:
        ctx.dims.same(a2[-1], b2[-2])
        batch = broadcast_shapes(ctx.dims, a2[:-2], b2[:-2])
    except ShapeError as e:
        raise ctx.fail(f"{list(a)} @ {list(b)}: {e}") from None
    return tuple(batch) + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())


def _batch_terms(dims: Sequence, out_batch: Sequence, matrix: cexpr.CExpr) -> list[str]:
    """Offset terms b{i} * stride of an operand with batch ``dims`` over the output batch axes."""
    pad = len(out_batch) - len(dims)
    strides = cexpr.strides(list(dims) + [matrix])[:-1] if dims else []
    terms = []
    for i, od in enumerate(out_batch):
        if i < pad:
            continue
        d, s = dims[i - pad], strides[i - pad]
        if d == 1:
            continue
        stride = cexpr.lit(s) if d == od else f"({d} == 1 ? 0 : {cexpr.lit(s)})"
        terms.append(f"b{i} * {stride}")
    return terms


def matmul_kernel(k: KernelContext, g: _gemm.GemmType, *, a_load: Optional[str], b_load: Optional[str],
                  y_store: Optional[str], checks: Sequence[dict[str, str]] = ()) -> Kernel:
    """The ``c/matmul.c.j2`` kernel of MatMul and MatMulInteger.

    a_load: expression (of row and k, ``{K}`` for the row length) filling a converted copy of A,
    or None to multiply A as is; b_load: same for B, of bb (batch), k, n and i (flat index);
    y_store: expression of ``y[i]`` storing a GEMM-type result to Y, or None to write Y directly.
    """
    a, b, y = k.input(0), k.input(1), k.out
    ad = [1] + a.dims if a.rank == 1 else list(a.dims)
    bd = list(b.dims) + [1] if b.rank == 1 else list(b.dims)
    m, kk, n = ad[-2], ad[-1], bd[-1]
    a_batch, b_batch = ad[:-2], bd[:-2]
    out_batch = y.dims[:len(y.dims) - (a.rank > 1) - (b.rank > 1)]
    checks = list(checks)
    if kk != bd[-2]:
        checks.append({"cond": f"{cexpr.lit(kk)} != {cexpr.lit(bd[-2])}",
                       "msg": c_string("MatMul: the inner dims of A and B differ")})
    # B shared by every batch and A not broadcast: one product with the batches stacked as rows.
    stacked = all(d == 1 for d in b_batch) and len(a_batch) == len(out_batch) and list(a_batch) == list(out_batch)
    rows = cexpr.mul(m, *out_batch) if stacked else m
    cast = "" if g.ctype == a.ctype else f"(const {g.ctype} *)"
    data = {
        "checks": checks, "ct": g.ctype, "gemm": g.fn, "K": cexpr.lit(kk), "N": cexpr.lit(n),
        "rows": cexpr.lit(rows), "MN": cexpr.lit(cexpr.mul(m, n)), "y_count": cexpr.lit(y.numel),
        "a_rows": cexpr.lit(cexpr.mul(m, *a_batch)), "b_batches": cexpr.lit(cexpr.prod(b_batch)),
        "a_load": a_load.format(K=cexpr.lit(kk)) if a_load else None, "a_ptr": cast + a.name,
        "b_load": b_load, "b_ptr": cast + b.name,
        "y_store": y_store, "y_name": y.name,
        "y_ptr": y.name if g.ctype == y.ctype else f"({g.ctype} *){y.name}",
        "batch": [] if stacked else [cexpr.lit(d) for d in out_batch],
        "a_terms": _batch_terms(a_batch, out_batch, cexpr.mul(m, kk)),
        "b_terms": _batch_terms(b_batch, out_batch, cexpr.mul(kk, n)),
    }
    data["packed"] = None
    if g is _gemm.FLOAT and k.target.prepack and b.value is not None and b.rank == 2 and stacked \
            and a_load is None and b_load is None and y_store is None:
        data["packed"] = k.constant("B_packed", _gemm.pack_cols(np.asarray(b.value, np.float32), k.target.gemm_nr))
    kernel = k.kernel("c/matmul.c.j2", helpers=g.helpers, **data)
    if a_load:
        kernel.scratch["a"] = cexpr.mul(a.numel, g.size)
    if b_load:
        kernel.scratch["b"] = cexpr.mul(b.numel, g.size)
    if y_store:
        kernel.scratch["acc"] = cexpr.mul(y.numel, g.size)
    kernel.scratch["pack"] = _gemm.pack_bytes(g, rows, n, kk, few_rows_unpacked=True,
                                              target=k.target)
    return kernel
