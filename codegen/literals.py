"""C literals of tensor values: inline constants of a model and kernels that write constants."""
from __future__ import annotations

import math

import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import UnsupportedError
from .names import c_bytes


def c_literal(x, dtype: dt.DType) -> str:
    """One element as a C constant expression of ``dtype``'s storage type."""
    if dtype is dt.STRING:
        return c_bytes(string_bytes(x))
    if dtype is dt.BFLOAT16:
        return str(int(np.asarray(x, dtype=dtype.np).view(np.uint16)))
    if dtype in dt.MINIFLOATS or dtype in dt.NARROW_INTS:
        return str(int(np.asarray(x, dtype=dtype.np).view(np.uint8)))  # the stored bits
    if dtype.is_float:
        v = float(x)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return v.hex() + ("" if dtype is dt.DOUBLE else "f")
    if dtype is dt.BOOL:
        return "1" if x else "0"
    v = int(x)
    if dtype is dt.INT64:
        return "INT64_MIN" if v == -2**63 else f"INT64_C({v})"
    if dtype is dt.INT32:
        return "INT32_MIN" if v == -2**31 else str(v)
    if dtype is dt.UINT64:
        return f"UINT64_C({v})"
    if dtype is dt.UINT32:
        return f"{v}u"
    return str(v)


def string_bytes(x) -> bytes:
    """A string element's bytes (numpy gives ``str`` or ``bytes``); NUL cannot be represented."""
    data = x.encode("utf-8") if isinstance(x, str) else bytes(x)
    if b"\0" in data:
        raise UnsupportedError(f"strings with NUL bytes are not supported ({data[:40]!r})")
    return data


def c_literals(array: np.ndarray, dtype: dt.DType) -> list[str]:
    return [c_literal(x, dtype) for x in np.asarray(array).reshape(-1)]


# Float weights of a package as the unsigned integers of the same bits: hex integers are the
# shortest exact spelling (about 11 characters a float, against 22 for hex floats).
BIT_PATTERN_TYPES = {dt.FLOAT: ("uint32_t", np.uint32), dt.DOUBLE: ("uint64_t", np.uint64)}


def c_bit_patterns(array: np.ndarray, dtype: dt.DType) -> tuple[str, list[str]]:
    """A float32 or float64 array's elements as hex integer literals of their bits, and the
    C type they initialize (the ``bits`` member of a union whose ``values`` member the code reads)."""
    ctype, bits = BIT_PATTERN_TYPES[dtype]
    flat = np.ascontiguousarray(np.asarray(array, dtype=dtype.np).reshape(-1))
    return ctype, [f"0x{v:x}" for v in flat.view(bits).tolist()]


def float_literal(x: float, compute: str) -> str:
    """``x`` as a C literal of a float compute type (``float``: shortest float32 digits, ``f`` suffix)."""
    with np.errstate(over="ignore"):
        v = np.float32(x) if compute == "float" else np.float64(x)
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return str(v) + "f" if compute == "float" else repr(float(v))
