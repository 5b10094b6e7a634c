"""Element types: one table that maps ONNX, numpy and C views of each type.

Storage type is what a tensor element occupies in memory; compute type is
what kernels do arithmetic in (float16/bfloat16 compute in float).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from onnx import TensorProto

from .errors import ModelError, UnsupportedError


@dataclass(frozen=True)
class DType:
    name: str              # ONNX type-string spelling: "float", "int64", ...
    onnx: int              # TensorProto.DataType value
    np: np.dtype
    c_type: str            # storage type in generated C
    compute: str           # arithmetic type in generated C
    load: str = "{}"       # storage -> compute conversion, "{}" is the operand
    store: str = "{}"      # compute -> storage conversion
    kind: str = "float"    # "float", "int", "uint", "bool", "string"

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def type_string(self) -> str:
        """The onnxruntime NodeArg.type spelling, e.g. ``tensor(float)``."""
        return f"tensor({self.name})"

    def __repr__(self) -> str:
        return self.name


def _d(name, onnx, npd, c_type, compute=None, load="{}", store="{}", kind="float") -> DType:
    return DType(name, onnx, np.dtype(npd), c_type, compute or c_type, load, store, kind)


FLOAT = _d("float", TensorProto.FLOAT, np.float32, "float")
DOUBLE = _d("double", TensorProto.DOUBLE, np.float64, "double")
FLOAT16 = _d("float16", TensorProto.FLOAT16, np.float16, "_Float16", "float",
             "((float){})", "((_Float16)({}))")
BFLOAT16 = _d("bfloat16", TensorProto.BFLOAT16, ml_dtypes.bfloat16, "uint16_t", "float",
              "onnxc_bf16_to_f32({})", "onnxc_f32_to_bf16({})")
INT8 = _d("int8", TensorProto.INT8, np.int8, "int8_t", kind="int")
INT16 = _d("int16", TensorProto.INT16, np.int16, "int16_t", kind="int")
INT32 = _d("int32", TensorProto.INT32, np.int32, "int32_t", kind="int")
INT64 = _d("int64", TensorProto.INT64, np.int64, "int64_t", kind="int")
UINT8 = _d("uint8", TensorProto.UINT8, np.uint8, "uint8_t", kind="uint")
UINT16 = _d("uint16", TensorProto.UINT16, np.uint16, "uint16_t", kind="uint")
UINT32 = _d("uint32", TensorProto.UINT32, np.uint32, "uint32_t", kind="uint")
UINT64 = _d("uint64", TensorProto.UINT64, np.uint64, "uint64_t", kind="uint")
BOOL = _d("bool", TensorProto.BOOL, np.bool_, "uint8_t", kind="bool")
# Strings: each element points at NUL-terminated UTF-8 bytes (a constant, the caller's input
# or the run's string pool); numpy holds them in object arrays, as onnxruntime returns them.
STRING = _d("string", TensorProto.STRING, object, "onnxc_string", kind="string")

# Narrow floats: one byte per element (as in ml_dtypes arrays), arithmetic in float through
# the conversion helpers of c/helpers/minifloat.c.j2. Stores saturate, as Cast does by default.
def _mini(name, onnx, npd, fn) -> DType:
    return _d(name, onnx, npd, "uint8_t", "float", f"onnxc_{fn}_to_f32({{}})", f"onnxc_f32_to_{fn}({{}}, 1)")


FLOAT8E4M3FN = _mini("float8e4m3fn", TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, "f8e4m3fn")
FLOAT8E4M3FNUZ = _mini("float8e4m3fnuz", TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, "f8e4m3fnuz")
FLOAT8E5M2 = _mini("float8e5m2", TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2, "f8e5m2")
FLOAT8E5M2FNUZ = _mini("float8e5m2fnuz", TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, "f8e5m2fnuz")
FLOAT8E8M0 = _mini("float8e8m0", TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu, "f8e8m0")
FLOAT4E2M1 = _mini("float4e2m1", TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, "f4e2m1")
MINIFLOATS = (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0, FLOAT4E2M1)

# Sub-byte integers: one byte per element holding the value's bits (as ml_dtypes stores
# them: -1 is 0x0F for int4); loads sign-extend, stores keep the low bits (wrap).
INT4 = _d("int4", TensorProto.INT4, ml_dtypes.int4, "uint8_t", "int32_t",
          "((int32_t)(((int32_t){} & 0xF) ^ 0x8) - 0x8)", "((uint8_t)((int32_t)({}) & 0xF))", kind="int")
UINT4 = _d("uint4", TensorProto.UINT4, ml_dtypes.uint4, "uint8_t", "int32_t", "((int32_t){} & 0xF)",
           "((uint8_t)((int32_t)({}) & 0xF))", kind="uint")
INT2 = _d("int2", TensorProto.INT2, ml_dtypes.int2, "uint8_t", "int32_t",
          "((int32_t)(((int32_t){} & 0x3) ^ 0x2) - 0x2)", "((uint8_t)((int32_t)({}) & 0x3))", kind="int")
UINT2 = _d("uint2", TensorProto.UINT2, ml_dtypes.uint2, "uint8_t", "int32_t", "((int32_t){} & 0x3)",
           "((uint8_t)((int32_t)({}) & 0x3))", kind="uint")
NARROW_INTS = (INT4, UINT4, INT2, UINT2)

ALL: tuple[DType, ...] = (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8, INT16, INT32, INT64,
                          UINT8, UINT16, UINT32, UINT64, BOOL, STRING) + MINIFLOATS + NARROW_INTS
FLOATS = (FLOAT, DOUBLE, FLOAT16, BFLOAT16)
SIGNED_INTS = (INT8, INT16, INT32, INT64)
UNSIGNED_INTS = (UINT8, UINT16, UINT32, UINT64)
INTS = SIGNED_INTS + UNSIGNED_INTS
NUMERIC = FLOATS + INTS

_BY_ONNX = {d.onnx: d for d in ALL}
_BY_NP = {d.np: d for d in ALL}


def from_onnx(code: int) -> DType:
    try:
        return _BY_ONNX[code]
    except KeyError:
        if code not in TensorProto.DataType.values() or code == TensorProto.UNDEFINED:
            raise ModelError(f"element type {code} is not an ONNX element type") from None
        raise UnsupportedError(f"element type {TensorProto.DataType.Name(code)} is not supported") from None


def from_numpy(dtype: np.dtype) -> DType:
    if np.dtype(dtype).kind in "USO":
        return STRING
    try:
        return _BY_NP[np.dtype(dtype)]
    except KeyError:
        raise UnsupportedError(f"numpy dtype {dtype} is not supported") from None


def by_name(name: str) -> DType:
    for d in ALL:
        if d.name == name:
            return d
    raise UnsupportedError(f"element type {name!r} is not supported")
