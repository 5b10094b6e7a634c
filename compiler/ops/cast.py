import dataclasses
from typing import Optional

import numpy as np
from onnx import TensorProto

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._cast import CAST_HELPERS, convert, narrow_int_from_float
from ._elementwise import elementwise_kernel
from .registry import OpDef, register


def target_type(to: int | str) -> dt.DType:
    """The ``to`` attribute (a TensorProto.DataType; its name before opset 6) as a DType."""
    if isinstance(to, str):
        if to.upper() not in TensorProto.DataType.keys():
            raise UnsupportedError(f"Cast to unknown type {to!r}")
        to = TensorProto.DataType.Value(to.upper())
    return dt.from_onnx(to)


_ROUND_MODES = {"up": 0, "down": 1, "nearest": 2}


def cast_kernel(k: KernelContext) -> Kernel:
    """Elementwise conversion of input 0 to the output's type (``saturate`` and ``round_mode``
    apply to the narrow float types)."""
    x, y = k.input(0), k.out
    if (x.dtype is dt.STRING) != (y.dtype is dt.STRING):
        return _string_cast(k, x, y)
    saturate = int(k.attrs.get("saturate", 1))
    if y.dtype is dt.FLOAT8E8M0:
        mode = _ROUND_MODES[k.attrs.get("round_mode", "up")]
        y = dataclasses.replace(y, dtype=dataclasses.replace(
            y.dtype, store=f"onnxc_f32_to_f8e8m0_mode({{}}, {saturate}, {mode})"))
    elif y.dtype in dt.MINIFLOATS and not saturate:
        y = dataclasses.replace(y, dtype=dataclasses.replace(y.dtype, store=y.dtype.store.replace(", 1)", ", 0)")))
    kernel = elementwise_kernel(k, [x], lambda v: convert(v[0], x.dtype, y.dtype), out=y)
    if x.dtype.is_float and y.dtype.is_int:
        kernel.helpers.append(CAST_HELPERS)
    return kernel


def _string_cast(k: KernelContext, x, y) -> Kernel:
    """Numbers to strings as onnxruntime spells them; strings parsed with strtod/strtoll."""
    if y.dtype is dt.STRING:
        src = x.dtype
        if src.is_float or src in dt.MINIFLOATS:
            digits = 8  # onnxruntime prints every float type with 8 significant digits
            fn = lambda v: f"onnxc_float_to_str(ctx, (double){v[0]}, {digits})"  # noqa: E731
        elif src.kind == "uint" or src is dt.BOOL:
            fn = lambda v: f"onnxc_uint_to_str(ctx, (uint64_t){v[0]})"  # noqa: E731
        else:
            fn = lambda v: f"onnxc_int_to_str(ctx, (int64_t){v[0]})"  # noqa: E731
    else:
        dst = y.dtype
        if dst.kind == "uint":
            fn = lambda v: convert(f"onnxc_str_to_uint({v[0]})", dt.UINT64, dst)  # noqa: E731
        elif dst.kind == "int":
            fn = lambda v: convert(f"onnxc_str_to_int({v[0]})", dt.INT64, dst)  # noqa: E731
        else:
            fn = lambda v: convert(f"onnxc_str_to_double({v[0]})", dt.DOUBLE, dst)  # noqa: E731
    kernel = elementwise_kernel(k, [x], fn)
    kernel.helpers += ["c/helpers/strings.c.j2", "c/helpers/string_cast.c.j2"]
    return kernel


@register("Cast", since=1)
class Cast(OpDef):
    """output = input converted to type ``to``."""

    def infer(self, node, ctx):
        to = target_type(node.attrs["to"])
        dims = ctx.sym_value(0)
        if dims is not None and to in (dt.INT64, dt.INT32) and ctx.inp(0).dtype.is_int:
            ctx.set_sym_value(0, dims)
        return [(to, ctx.inp(0).shape)]

    def lower(self, node, k):
        return cast_kernel(k)

    def evaluate(self, node):
        return fold_narrow_int_cast(node)


def fold_narrow_int_cast(node) -> Optional[list[np.ndarray]]:
    """A constant float cast to a sub-byte integer type, by onnxc's rule, not ml_dtypes'."""
    x, y = node.inputs[0], node.outputs[0]
    if y.dtype in dt.NARROW_INTS and x.dtype.is_float:
        return [narrow_int_from_float(x.const, y.dtype)]
    return None
