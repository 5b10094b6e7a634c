"""Element type conversions as C expressions (Cast, CastLike, Pow).

:func:`convert` turns a value of ``src``'s compute type into one that
``dst.store`` accepts. Float -> integer goes through the helpers of
``c/helpers/cast.c.j2`` (x86 results, no undefined behaviour for NaN or
out-of-range values); integer -> integer keeps the low bits; double -> bfloat16
rounds through float.
"""
from __future__ import annotations

from .. import dtypes as dt

CAST_HELPERS = "c/helpers/cast.c.j2"


def float_to_int(expr: str, dst: dt.DType) -> str:
    """A float/double ``expr`` truncated to integer type ``dst``."""
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
