"""The GEMM helper (``c/helpers/gemm.c.j2``) as lowerings see it: which kernel an
element type uses and how much ``pack`` scratch a call needs.

Kernels: ``onnxc_gemm_float`` / ``_double`` and, for integers, ``_uint32`` /
``_uint64`` (signed types reuse them through pointer casts: wrapping products
are the same bits). float16/bfloat16 are converted to float first.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from .. import dtypes as dt

HELPER = "c/helpers/gemm.c.j2"

# Block sizes of c/helpers/gemm.c.j2 (keep in sync).
MR = 4
KC = 256
MC = 64
NR = {"float": 16, "double": 8, "uint32": 16, "uint64": 8}


@dataclass(frozen=True)
class GemmType:
    """The helper kernel that multiplies tensors of one element type."""
    name: str        # helper suffix: onnxc_gemm_<name>
    ctype: str       # C element type of the helper's operands
    size: int        # bytes per element

    @property
    def fn(self) -> str:
        return f"onnxc_gemm_{self.name}"


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


def pack_bytes(g: GemmType, m: CExpr, n: CExpr, k: CExpr, few_rows_unpacked: bool = True) -> CExpr:
    """Bytes of ``pack`` one ``onnxc_gemm_*(m, n, k, ...)`` call needs (an upper bound if symbolic).

    few_rows_unpacked: the operands' strides let the helper skip packing when m < MR
    (B rows contiguous, or B' columns and A rows contiguous)."""
    nr = NR[g.name]
    nc = 16 * nr
    if isinstance(m, int) and isinstance(n, int) and isinstance(k, int):
        if m < MR and few_rows_unpacked:
            return 0
        kc = min(k, KC)
        n_up = min(-(-n // nr) * nr, nc)
        m_up = min(-(-m // MR) * MR, MC)
        return cexpr.mul(kc * (n_up + m_up), g.size)
    return KC * (nc + MC) * g.size
