"""The GEMM helpers (``c/helpers/gemm.c.j2`` and, per type, ``gemm_<name>.c.j2``) as lowerings
see them: which kernel an element type uses, the helpers a call needs and how much ``pack``
scratch it takes.

Kernels: ``onnxc_gemm_float`` / ``_double`` and, for integers, ``_uint32`` /
``_uint64`` (signed types reuse them through pointer casts: wrapping products
are the same bits). float16/bfloat16 are converted to float first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Target
from .. import dtypes as dt

HELPER = "c/helpers/gemm.c.j2"

# Block sizes of c/helpers/gemm.c.j2 (keep in sync): the largest of any build target, so that
# `pack` is big enough whichever SIMD micro-kernel the C compiler picks (float32: MR x NR is
# 12 x 32 with AVX-512, 6 x 16 with AVX2, 12 x 8 with NEON, 4 x 16 in portable C).
FEW_ROWS = 4      # fewer rows than this: the operands are used in place, not packed
KC = 256
BLOCK_PANELS = 16  # MR-row (NR-column) panels in a packed block of A (B)
SMALL_KC, SMALL_BLOCK_PANELS = 64, 4   # Target.small_memory (ONNXC_SMALL_MEMORY in the C helpers)
MR = {"float": 12, "double": 4, "uint32": 4, "uint64": 4}
NR = {"float": 32, "double": 8, "uint32": 16, "uint64": 8}


@dataclass(frozen=True)
class GemmType:
    """The helper kernel that multiplies tensors of one element type."""
    name: str        # helper suffix: onnxc_gemm_<name>
    ctype: str       # C element type of the helper's operands
    size: int        # bytes per element

    @property
    def fn(self) -> str:
        return f"onnxc_gemm_{self.name}"

    @property
    def helpers(self) -> tuple[str, ...]:
        """The helper templates that define ``fn`` (float32's is HELPER itself)."""
        return (HELPER,) if self.name == "float" else (HELPER, f"c/helpers/gemm_{self.name}.c.j2")


FLOAT = GemmType("float", "float", 4)
DOUBLE = GemmType("double", "double", 8)
UINT32 = GemmType("uint32", "uint32_t", 4)
UINT64 = GemmType("uint64", "uint64_t", 8)


def gemm_type(t: dt.DType) -> GemmType:
    """The kernel for tensors of type ``t`` (storage of at most 32 bits -> 32-bit kernels)."""
    if t is dt.DOUBLE:
        return DOUBLE
    if t.is_float:
        return FLOAT
    return UINT64 if t.itemsize == 8 else UINT32


def native(t: dt.DType) -> bool:
    """Whether tensors of ``t`` can be handed to the kernel without a converted copy."""
    return t in (dt.FLOAT, dt.DOUBLE, dt.INT32, dt.UINT32, dt.INT64, dt.UINT64)


def pack_bytes(g: GemmType, m: CExpr, n: CExpr, k: CExpr, few_rows_unpacked: bool = True,
               target: Optional[Target] = None) -> CExpr:
    """Bytes of ``pack`` one ``onnxc_gemm_*(m, n, k, ...)`` call needs (an upper bound if symbolic).

    few_rows_unpacked: the operands' strides let the helper skip packing when m < FEW_ROWS
    (B rows contiguous, or B' columns and A rows contiguous; float32 always, with A not
    packed: B packed by the compiler goes to onnxc_sgemv_packed_b, B as it is to
    onnxc_sgemm_few_rows). target: its threads (the float32 GEMM gives each thread a part of
    this size; the other kernels share one) and whether blocks are small (small_memory)."""
    threads = target.threads if target is not None else 1
    one = _pack_bytes_one(g, m, n, k, few_rows_unpacked, target is not None and target.small_memory,
                          (target.gemm_mr, target.gemm_nr) if target is not None and g is FLOAT else None)
    return cexpr.mul(one, threads) if g is FLOAT and threads > 1 else one


def _pack_bytes_one(g: GemmType, m: CExpr, n: CExpr, k: CExpr, few_rows_unpacked: bool, small: bool,
                    tile: Optional[tuple[int, int]]) -> CExpr:
    nr, mr = NR[g.name], MR[g.name]
    if small and tile is not None:   # (elsewhere the largest tile of any SIMD family: an upper bound)
        mr, nr = tile
    kc_max, panels = (SMALL_KC, SMALL_BLOCK_PANELS) if small else (KC, BLOCK_PANELS)
    nc, mc = panels * nr, panels * mr
    if isinstance(m, int) and isinstance(n, int) and isinstance(k, int):
        if m < FEW_ROWS and few_rows_unpacked:
            return 0
        kc = min(k, kc_max)
        n_up = min(-(-n // nr) * nr, nc)
        m_up = min(-(-m // mr) * mr, mc)
        return cexpr.mul(kc * (n_up + m_up), g.size)
    return kc_max * (nc + mc) * g.size


def _panels(rows: np.ndarray, width: int) -> np.ndarray:
    """``rows`` (R x K) as panels of ``width`` rows over the whole K, panel q holding
    rows[q * width + r][k] at k * width + r; rows past R are 0. One pass over the data: the
    whole panels are written from a strided view of ``rows``, the last one padded."""
    r, k = rows.shape
    full, rest = divmod(r, width)
    out = np.empty((full + (rest > 0), k, width), np.float32)
    out[:full] = rows[:full * width].reshape(full, width, k).transpose(0, 2, 1)
    if rest:
        out[full, :, :rest] = rows[full * width:].T
        out[full, :, rest:] = 0
    return out.reshape(-1)


def pack_rows(a: np.ndarray, mr: int) -> np.ndarray:
    """A (M x K) as the float32 GEMM's packed A (c/helpers/sgemm.c.j2, ``Ap``): MR-row panels
    over the whole K, panel q holding A[q * MR + r][k] at k * MR + r; rows past M are 0."""
    return _panels(a, mr)


def pack_cols(b: np.ndarray, nr: int) -> np.ndarray:
    """B (K x N) as the float32 GEMM's packed B (``Bp``): NR-column panels over the whole K,
    panel p holding B[k][p * NR + j] at k * NR + j; columns past N are 0. (B's columns are the
    rows of its transpose, a view: each panel reads NR consecutive floats of every row of B,
    or NR rows of a transposed weight along their length.)"""
    return _panels(b.T, nr)
