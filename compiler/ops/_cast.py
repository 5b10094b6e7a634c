"""Element type conversions as C expressions (Cast, CastLike, Pow).

:func:`convert` turns a value of ``src``'s compute type into one that
``dst.store`` accepts. Float -> integer goes through the helpers of
``c/helpers/cast.c.j2`` (x86 results, no undefined behaviour for NaN or
out-of-range values; the sub-byte integers as onnxruntime computes them, see
:func:`narrow_int_from_float`); integer -> integer keeps the low bits; double ->
bfloat16 rounds through float.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt

CAST_HELPERS = "c/helpers/cast.c.j2"


def float_to_int(expr: str, dst: dt.DType) -> str:
    """A float/double ``expr`` converted to integer type ``dst``: truncated, except for the
    sub-byte types (:func:`narrow_int_from_float`)."""
    if dst in dt.NARROW_INTS:
        return f"onnxc_f2narrow({expr})"
    if dst is dt.INT64:
        return f"onnxc_f2i64({expr})"
    if dst is dt.UINT64:
        return f"onnxc_f2u64({expr})"
    if dst is dt.UINT32:
        return f"(uint32_t)onnxc_f2i64({expr})"
    if dst is dt.INT32:
        return f"onnxc_f2i32({expr})"
    return f"({dst.c_type})onnxc_f2i32({expr})"


def convert(expr: str, src: dt.DType, dst: dt.DType) -> str:
    """``expr`` (``src`` compute type) as a value for ``dst.store``."""
    if src is dst:
        return expr
    if dst is dt.BOOL:
        return f"({expr} != 0)"
    if dst.is_int and src.is_float:
        return float_to_int(expr, dst)
    if dst is dt.FLOAT16 or src.compute == dst.compute:
        return expr  # the store converts from any arithmetic type with a single rounding
    return f"({dst.compute})({expr})"


def narrow_int_from_float(x: np.ndarray, dst: dt.DType) -> np.ndarray:
    """Float -> int4/uint4/int2/uint2, the rule of ``onnxc_f2narrow`` (onnxruntime's): round
    half away from zero, keep the low bits (two's-complement wrap); NaN and infinities give 0.

    Constant folding uses this, not the reference evaluator, whose answer for values out of
    the type's range is the installed ml_dtypes' (it wraps before 0.7 and gives 0 since)."""
    bits = 4 if dst in (dt.INT4, dt.UINT4) else 2
    x = np.asarray(x).astype(np.float64)
    finite = np.isfinite(x)
    x = np.where(finite, x, 0.0)
    whole = np.trunc(x)
    rounded = whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0.0)   # x - whole is exact
    low = np.mod(np.fmod(rounded, 1 << bits).astype(np.int64), 1 << bits)
    if dst.kind == "int":
        low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
    return low.astype(dst.np)
