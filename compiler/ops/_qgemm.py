"""The 8-bit GEMM helper (``c/helpers/qgemm.c.j2``) as the quantized ops of a native build see
it: which operand is multiplied as unsigned bytes, how a byte of the other signedness is flipped
(x ^ 0x80) and its zero point moved by 128, the packed layouts (for the compiler to pack
constant weights), and the matrix-product kernel (``c/qmatmul.c.j2``) that QLinearMatMul,
MatMulInteger and QGemm share. Packages (``--target c``) and CUDA builds keep their own kernels
(``Target.int8_gemm``).

The helper computes C = (A - za)(B - zb) exactly in int32 from packed bytes; requantization
stays the ops' own float arithmetic (onnxruntime's), applied to those int32 sums, so outputs
are the same bits as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from .mat_mul import _batch_terms

HELPER = "c/helpers/qgemm.c.j2"
MR, NR = 8, 32   # ONNXC_QGEMM_MR / _NR of the helper (keep in sync)
FLIP = 0x80


@dataclass(frozen=True)
class Side:
    """How one operand's bytes enter the helper: ``flip`` (0 or 0x80) applied by the packer and
    ``shift`` added to its zero point, given the side's signedness and the source's."""
    flip: int
    shift: int

    @staticmethod
    def of(source: dt.DType, signed_side: bool) -> "Side":
        src_signed = source is dt.INT8
        if src_signed == signed_side:
            return Side(0, 0)
        # s8 x read as u8 is x + 128; u8 x read as s8 is x - 128: the zero point moves alike
        return Side(FLIP, 128 if src_signed else -128)


def round_up(x: CExpr, m: int) -> CExpr:
    return -(-x // m) * m if isinstance(x, int) else f"(({x} + {m - 1}) / {m} * {m})"


def a_bytes(m: CExpr, k: CExpr) -> CExpr:
    """Bytes of a packed A of m rows (onnxc_qgemm_a_bytes)."""
    return cexpr.mul(round_up(m, MR), round_up(k, 4))


def b_bytes(n: CExpr, k: CExpr) -> CExpr:
    """Bytes of a packed B of n columns (onnxc_qgemm_b_bytes)."""
    return cexpr.mul(round_up(n, NR), round_up(k, 4))


def _bytes(x: np.ndarray, flip: int) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8) ^ np.uint8(flip)


def _sums(packed: np.ndarray, signed: bool, axis: int) -> np.ndarray:
    values = packed.view(np.int8) if signed else packed
    return values.astype(np.int64).sum(axis=axis).astype(np.int32)


def pack_a(a: np.ndarray, flip: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) as onnxc_qgemm_pack_a packs it: (bytes, row sums)."""
    v = _bytes(a, flip)
    m, k = v.shape
    padded = np.zeros((round_up(m, MR), round_up(k, 4)), np.uint8)
    padded[:m, :k] = v
    return padded.reshape(-1), _sums(v, signed, 1)


def pack_b(b: np.ndarray, flip: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """B (K x N) as onnxc_qgemm_pack_b packs it: (bytes, column sums). Panel p, group g,
    column j, byte t hold B[4 g + t][p * NR + j]."""
    v = _bytes(b, flip)
    k, n = v.shape
    kp, np_ = round_up(k, 4), round_up(n, NR)
    padded = np.zeros((kp, np_), np.uint8)
    padded[:k, :n] = v
    packed = padded.reshape(kp // 4, 4, np_ // NR, NR).transpose(2, 0, 3, 1)
    return packed.reshape(-1), _sums(v, signed, 0)


def matmul_kernel(k: KernelContext, a: TensorRef, b: TensorRef, *, a_zero: str, b_zero: str, b_zero_count: CExpr,
                  y_store: Optional[str], bias: str = "0", trans_a: bool = False, trans_b: bool = False,
                  checks: Sequence[dict[str, str]] = ()) -> Kernel:
    """The ``c/qmatmul.c.j2`` kernel: Y = (A - a_zero)(B - b_zero) with numpy's batch
    broadcasting (or a 2-D Gemm with ``trans_a`` / ``trans_b``), the int32 sums written to Y
    (``y_store`` None: an int32 output) or stored per element by ``y_store``, a C expression of
    ``acc`` (the uint32 sum plus ``bias``), ``r`` (the row over all batches) and ``j``.
    a_zero: an int32 C expression; b_zero: one of ``j`` (< b_zero_count, 1 or N)."""
    y = k.out
    ad = [1] + a.dims if a.rank == 1 else list(a.dims)
    bd = list(b.dims) + [1] if b.rank == 1 else list(b.dims)
    if trans_a:
        ad = ad[:-2] + [ad[-1], ad[-2]]
    if trans_b:
        bd = bd[:-2] + [bd[-1], bd[-2]]
    m, kk, n = ad[-2], ad[-1], bd[-1]
    a_batch, b_batch = ad[:-2], bd[:-2]
    out_batch = y.dims[:len(y.dims) - (a.rank > 1) - (b.rank > 1)] if not (trans_a or trans_b) else []
    checks = list(checks)
    if kk != bd[-2]:
        checks.append({"cond": f"{cexpr.lit(kk)} != {cexpr.lit(bd[-2])}",
                       "msg": c_string("the inner dims of A and B differ")})
    stacked = all(d == 1 for d in b_batch) and len(a_batch) == len(out_batch) and list(a_batch) == list(out_batch)
    rows = cexpr.mul(m, *out_batch) if stacked else m
    a_side, b_side = Side.of(a.dtype, signed_side=False), Side.of(b.dtype, signed_side=True)
    b_fixed = all(d == 1 for d in b_batch)   # one B for every batch entry: packed once
    packed = None
    if b.value is not None and b_fixed and b.rank == 2:
        bv = np.asarray(b.value).reshape(b.value.shape[-2:])
        data, sums = pack_b(bv.T if trans_b else bv, b_side.flip, True)
        packed = {"bytes": k.constant("B_qpacked", data), "sums": k.constant("B_qsums", sums)}
    data = {
        "checks": checks, "K": cexpr.lit(kk), "N": cexpr.lit(n), "rows": cexpr.lit(rows),
        "MN": cexpr.lit(cexpr.mul(m, n)), "y_rows": cexpr.lit(cexpr.mul(m, *out_batch)),
        "a": a.name, "b": b.name, "y": y.name,
        "rsa": 1 if trans_a else cexpr.lit(kk), "csa": cexpr.lit(m) if trans_a else 1,
        "rsb": 1 if trans_b else cexpr.lit(n), "csb": cexpr.lit(kk) if trans_b else 1,
        "a_flip": a_side.flip, "b_flip": b_side.flip,
        "a_zero": f"{a_zero} + {a_side.shift}" if a_side.shift else a_zero,
        "b_zero": f"{b_zero} + {b_side.shift}" if b_side.shift else b_zero,
        "zb_count": cexpr.lit(b_zero_count), "packed": packed, "b_fixed": b_fixed,
        "batch": [] if stacked else [cexpr.lit(d) for d in out_batch],
        "a_terms": _batch_terms(a_batch, out_batch, cexpr.mul(m, kk)),
        "b_terms": _batch_terms(b_batch, out_batch, cexpr.mul(kk, n)),
        "y_store": y_store, "bias": bias,
    }
    kernel = k.kernel("c/qmatmul.c.j2", helpers=(HELPER,), **data)
    kernel.scratch["qa"] = a_bytes(rows, kk)
    kernel.scratch["qa_sums"] = cexpr.mul(round_up(rows, MR), 4)
    kernel.scratch["qzb"] = cexpr.mul(b_zero_count, 4)
    if packed is None:
        kernel.scratch["qb"] = b_bytes(n, kk)
        kernel.scratch["qb_sums"] = cexpr.mul(n, 4)
    if y_store is not None:
        kernel.scratch["acc"] = cexpr.mul(y.numel, 4)
    kernel.note = f"8-bit GEMM ({HELPER}){', B packed when compiling' if packed else ''}"
    return kernel
