"""Tables for the narrow float types (float8 variants, float4e2m1), from ml_dtypes.

Decoding is a table lookup; encoding rounds to the nearest representable value
(ties to the even code) by binary search over the ascending positive values, then
either saturates or overflows the way ml_dtypes does (to infinity where the type
has one, else NaN; float4e2m1 always saturates).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..compiler import dtypes as dt

_FN = {dt.FLOAT8E4M3FN: "f8e4m3fn", dt.FLOAT8E4M3FNUZ: "f8e4m3fnuz", dt.FLOAT8E5M2: "f8e5m2",
       dt.FLOAT8E5M2FNUZ: "f8e5m2fnuz", dt.FLOAT4E2M1: "f4e2m1"}


def _lit(x: float) -> str:
    if np.isnan(x):
        return "NAN"
    if np.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    return float(x).hex() + "f"


@functools.lru_cache(maxsize=None)
def table(dtype: dt.DType) -> dict[str, Any]:
    bits = 4 if dtype is dt.FLOAT4E2M1 else 8
    codes = np.arange(1 << bits, dtype=np.uint8)
    decoded = codes.view(dtype.np).astype(np.float32)
    sign = 1 << (bits - 1)
    positive = decoded[:sign]
    finite = int(np.argmax(~np.isfinite(positive))) if not np.all(np.isfinite(positive)) else sign
    values = positive[:finite]
    assert np.all(np.diff(values) > 0), dtype
    nan = np.array([np.nan], np.float32).astype(dtype.np).view(np.uint8)[0]
    overflow = np.array([np.float32(values[-1]) * 4], np.float32).astype(dtype.np).view(np.uint8)[0]
    negative_zero = np.array([-0.0], np.float32).astype(dtype.np).view(np.uint8)[0]
    return {"fn": _FN[dtype], "decode": [_lit(v) for v in decoded], "finite": [_lit(v) for v in values],
            "count": len(values), "sign": sign if negative_zero == sign else 0, "nan": int(nan),
            "overflow": int(overflow), "neg_sign": sign,
            "top_ulp": _lit(float(values[-1] - values[-2]))}


def helper_data(dtypes: set[dt.DType]) -> dict[str, Any]:
    return {"minifloats": [table(d) for d in dt.MINIFLOATS if d in dtypes and d in _FN],
            "e8m0": dt.FLOAT8E8M0 in dtypes}
