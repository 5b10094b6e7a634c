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
from ...codegen.memory import thread_part
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from ._conv_pool import Window, affine, axes_data, flat_index, negate, pads_c, row_offset, window
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


def a_bytes(m: CExpr, k: CExpr) -> CExpr:
    """Bytes of a packed A of m rows (onnxc_qgemm_a_bytes)."""
    return cexpr.mul(cexpr.round_up(m, MR), cexpr.round_up(k, 4))


def b_bytes(n: CExpr, k: CExpr) -> CExpr:
    """Bytes of a packed B of n columns (onnxc_qgemm_b_bytes)."""
    return cexpr.mul(cexpr.round_up(n, NR), cexpr.round_up(k, 4))


def _bytes(x: np.ndarray, flip: int) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8) ^ np.uint8(flip)


def _sums(packed: np.ndarray, signed: bool, axis: int) -> np.ndarray:
    values = packed.view(np.int8) if signed else packed
    return values.astype(np.int64).sum(axis=axis).astype(np.int32)


def pack_a(a: np.ndarray, flip: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) as onnxc_qgemm_pack_a packs it: (bytes, row sums)."""
    v = _bytes(a, flip)
    m, k = v.shape
    padded = np.zeros((cexpr.round_up(m, MR), cexpr.round_up(k, 4)), np.uint8)
    padded[:m, :k] = v
    return padded.reshape(-1), _sums(v, signed, 1)


def pack_b(b: np.ndarray, flip: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """B (K x N) as onnxc_qgemm_pack_b packs it: (bytes, column sums). Panel p, group g,
    column j, byte t hold B[4 g + t][p * NR + j]."""
    v = _bytes(b, flip)
    k, n = v.shape
    kp, np_ = cexpr.round_up(k, 4), cexpr.round_up(n, NR)
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
    kernel.scratch["qa_sums"] = cexpr.mul(cexpr.round_up(rows, MR), 4)
    kernel.scratch["qzb"] = cexpr.mul(b_zero_count, 4)
    if packed is None:
        kernel.scratch["qb"] = b_bytes(n, kk)
        kernel.scratch["qb_sums"] = cexpr.mul(n, 4)
    if y_store is not None:
        kernel.scratch["acc"] = cexpr.mul(y.numel, 4)
    kernel.note = f"8-bit GEMM ({HELPER}){', B packed when compiling' if packed else ''}"
    return kernel


# im2col bytes a band of output rows aims for, and the fewest outputs a band has (as the float
# convolution's bands, compiler/ops/conv.py: each band streams all the weights once)
COL_BYTES = 1 << 19
COL_MIN_WIDTH = 512


def conv_kernel(node: Node, k: KernelContext, *, x_zero: str, w_zero: str, bias: str, y_store: Optional[str],
                checks: Sequence[dict[str, str]] = ()) -> Optional[Kernel]:
    """The ``c/qconv.c.j2`` kernel of QLinearConv and ConvInteger (X input 0, W the weights
    ``k.input(1)``): per image and group, im2col of X's bytes (padding holds X's zero point,
    which contributes nothing) in bands of output rows, the constant W packed when compiling
    as the GEMM's signed rows, X's bytes as its unsigned columns. x_zero: X's zero point (a C
    expression); w_zero: one of output channel ``m``; bias: one of ``g`` and ``m``; y_store:
    of ``acc`` (uint32 sum plus bias) and ``m`` storing to Y, or None for an int32 Y written by
    the GEMM. None where it does not apply: W not a constant, sizes other than the batch not
    static, or a depthwise convolution (its GEMMs would have one row)."""
    x, w, y = k.input(0), k.input(1), k.out
    group = node.attrs.get("group", 1)
    rank = x.rank - 2
    if w.value is None or not all(isinstance(d, int) for d in (*x.dims[1:], *w.dims, *y.dims[1:])):
        return None
    m, cg = w.dims[:2]
    mg = m // group
    win = window(node, rank, w.shape[2:], k.unsupported)
    in_dims, out_dims = x.dims[2:], y.dims[2:]
    begins, ends = pads_c(win, in_dims, out_dims)
    if mg == 1 and cg == 1:
        return _depthwise(k, win, begins, x_zero=x_zero, w_zero=w_zero, bias=bias, y_store=y_store, checks=checks)
    kp = int(np.prod(win.kernel))
    kk = cg * kp
    size_in, size_out = int(np.prod(in_dims)), int(np.prod(out_dims))
    direct = all(v == 1 for v in win.kernel + win.strides) and all(p == 0 for p in begins + ends)
    w_side, x_side = Side.of(w.dtype, signed_side=True), Side.of(x.dtype, signed_side=False)
    rows_per_group = cexpr.round_up(mg, MR) * cexpr.round_up(kk, 4)
    weights = np.asarray(w.value).reshape(group, mg, kk)
    packs = [pack_a(wg, w_side.flip, True) for wg in weights]
    axes = axes_data(win, in_dims, out_dims, begins)
    for a, axis in enumerate(axes):
        o_term = [(f"o{a}", win.strides[a])] if a < rank - 1 else []
        axis["pos"] = affine(*o_term, (f"k{a}", win.dilations[a]), const=negate(begins[a]))
    inner = int(np.prod(out_dims[1:]))
    if rank == 1:
        rows = 1
    else:
        rows = min(out_dims[0], max(1, COL_BYTES // max(1, kk * inner), -(-COL_MIN_WIDTH // max(1, inner))))
    width = size_out if direct or rank == 1 else rows * inner
    data = {
        "checks": list(checks), "N": cexpr.lit(x.dims[0]), "C": x.dims[1], "M": m, "G": group, "Cg": cg, "Mg": mg,
        "K": kk, "IN": size_in, "OUT": size_out, "axes": axes, "direct": direct, "rows": rows, "inner": inner,
        "x": x.name, "y": y.name, "yt": y.ctype,
        "packed": k.constant("W_qpacked", np.concatenate([p[0] for p in packs])),
        "sums": k.constant("W_qsums", np.concatenate([p[1] for p in packs])), "group_bytes": rows_per_group,
        "x_zero": x_zero, "x_flip": x_side.flip, "x_shift": x_side.shift, "w_zero": w_zero, "w_shift": w_side.shift,
        "bias": bias, "y_store": y_store,
        "row_index": flat_index(["c"] + [f"k{a}" for a in range(rank)], [cg] + list(win.kernel)),
        "dst_offset": row_offset(["(o0 - first)"] + [f"o{a}" for a in range(1, rank - 1)], out_dims),
        "src_offset": row_offset([f"i{a}" for a in range(rank - 1)], in_dims),
    }
    kernel = k.kernel("c/qconv.c.j2", helpers=(HELPER,), **data)
    kernel.scratch["qzw"] = m * 4
    kernel.scratch["qb"] = b_bytes(width, kk)
    kernel.scratch["qb_sums"] = width * 4
    if not direct:
        kernel.scratch["col"] = kk * width
    if y_store is not None:
        kernel.scratch["acc"] = mg * size_out * 4
    kernel.note = f"8-bit GEMM ({HELPER}), W packed when compiling"
    return kernel


def _depthwise(k: KernelContext, win: Window, begins: Sequence[CExpr], *, x_zero: str, w_zero: str, bias: str,
               y_store: Optional[str], checks: Sequence[dict[str, str]]) -> Optional[Kernel]:
    """The ``c/qconv_depthwise.c.j2`` kernel of a 2-D depthwise convolution with static sizes
    (but the batch) and pads of at least 0, or None."""
    x, w, y = k.input(0), k.input(1), k.out
    if win.rank != 2 or any(not isinstance(b, int) or b < 0 for b in begins):
        return None
    (h, wd), (oh, ow) = x.dims[2:], y.dims[2:]
    ph = (oh - 1) * win.strides[0] + win.extent(0)
    pw = (ow - 1) * win.strides[1] + win.extent(1)
    pws = -(-pw // win.strides[1])   # columns of each column phase
    phs = -(-ph // win.strides[0])   # rows of each row phase
    # (the plane's phases, and a row of slack for the dropped columns of the last output row)
    plane = win.strides[1] * win.strides[0] * phs * pws + pws
    sums = -(-(oh * pws) // 16) * 16    # the sums computed, whole vectors (those past oh * pws dropped)
    plane += sums - oh * pws            # (zeros the last vectors read)
    data = {"checks": list(checks), "N": cexpr.lit(x.dims[0]), "C": x.dims[1], "H": h, "W": wd, "IN": h * wd,
            "OH": oh, "OW": ow, "OUT": oh * ow, "KH": win.kernel[0], "KW": win.kernel[1],
            "KK": win.kernel[0] * win.kernel[1], "SH": win.strides[0], "SW": win.strides[1],
            "DH": win.dilations[0], "DW": win.dilations[1], "PT": begins[0], "PL": begins[1], "PH": ph, "PHS": phs, "PWS": pws,
            "PLANE": plane, "PLANE_STRIDE": thread_part(plane, 2), "SUMS": sums,
            "x": x.name, "w": w.name, "y": y.name, "xt": x.ctype, "yt": y.ctype,
            "x_zero": x_zero, "w_zero": w_zero, "bias": bias, "y_store": y_store}
    kernel = k.kernel("c/qconv_depthwise.c.j2", **data)
    kernel.scratch["plane"] = k.target.threads * data["PLANE_STRIDE"] * 2
    kernel.scratch["sums"] = k.target.threads * sums * 4
    kernel.note = "direct int8 depthwise convolution"
    return kernel
