"""Shared checks and C expressions of onnxruntime's quantized contrib ops (com.microsoft
QLinearAdd, QLinearMul, QLinearSigmoid ...): these ops have no ONNX schema, so their
attributes are checked here, and their float arithmetic follows onnxruntime's kernels step
by step (``c/helpers/qlinear.c.j2``) to give the same integers."""
from __future__ import annotations

from typing import Any

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from .. import dtypes as dt
from ..dims import broadcast_shapes
from ..errors import UnsupportedError
from ..ir import Node, Value
from . import _gemm
from . import _quantize as qz
from .mat_mul import matmul_kernel
from .registry import InferContext

MS = "com.microsoft"
INT8S = (dt.INT8, dt.UINT8)
HELPER = "c/helpers/qlinear.c.j2"


def attributes(node: Node, ctx: InferContext, defaults: dict[str, Any]) -> None:
    """Fill in contrib attribute defaults; an attribute onnxruntime does not know is an error."""
    for name in node.attrs:
        if name not in defaults:
            known = ", ".join(defaults) or "none"
            raise ctx.fail(f"unknown attribute {name!r} ({node.op_type} has: {known})")
    for name, value in defaults.items():
        node.attrs.setdefault(name, value)


def one_value(ctx: InferContext, i: int, dtype: dt.DType, what: str) -> None:
    """Input ``i`` (when present) is a scalar or a one-element vector of ``dtype``."""
    if not ctx.has(i):
        return
    v = ctx.inp(i)
    if v.dtype != dtype:
        raise ctx.fail(f"{what} type {v.dtype} should be {dtype}")
    shape = v.shape
    if len(shape) > 1 or (shape and isinstance(shape[0], int) and shape[0] != 1):
        raise ctx.fail(f"{what} must hold one value, got shape {list(shape)}")


def zero(k: KernelContext, i: int) -> str:
    """The zero point of input ``i`` as an int32 C expression (0 when omitted)."""
    return f"(int32_t){k.input(i).name}[0]" if k.has_input(i) else "0"


def scale(k: KernelContext, i: int) -> str:
    return f"{k.input(i).name}[0]"


def saturate(value: str, y: TensorRef) -> str:
    """Float ``value`` rounded half to even and saturated to y's type, as y's C type."""
    q = qz.QUANT_TYPES[y.dtype]
    return f"({y.ctype})onnxc_qlinear_sat({value}, {q.lo}, {q.hi})"


def saturate_int(value: str, t: dt.DType) -> str:
    """Float ``value`` rounded half to even and saturated to the range of ``t``, as an int32."""
    q = qz.QUANT_TYPES[t]
    return f"onnxc_qlinear_sat({value}, {q.lo}, {q.hi})"


def lookup_kernel(k: KernelContext, transform: str) -> Kernel:
    """The 256-entry table kernel of QLinearSigmoid / QLinearLeakyRelu: x (input 0) is
    dequantized with inputs 1 and 2 in float32, ``transform`` (a C expression of float x)
    applied, and the result quantized with inputs 3 and 4 (y / scale rounded half to even, then the
    zero point added, as MlasQuantizeLinear does)."""
    x, y = k.input(0), k.out
    dequantized = f"{scale(k, 1)} * (float)((int32_t)({x.ctype})i - {zero(k, 2)})"
    quantized = saturate(f"rintf(y / {scale(k, 3)}) + (float){zero(k, 4)}", y)
    return k.kernel("c/qlinear_lookup.c.j2", helpers=(HELPER,), ctype=y.ctype, dequantized=dequantized,
                    transform=transform, quantized=quantized, n=cexpr.lit(y.numel),
                    x=x.name, y=y.name)


def check_unary(node: Node, ctx: InferContext):
    """Inference of the table ops: X, X_scale, X_zero_point?, Y_scale, Y_zero_point?."""
    x = ctx.inp(0)
    if x.dtype not in INT8S:
        raise ctx.fail(f"X type {x.dtype} is not int8 or uint8")
    one_value(ctx, 1, dt.FLOAT, "X_scale")
    one_value(ctx, 2, x.dtype, "X_zero_point")
    one_value(ctx, 3, dt.FLOAT, "Y_scale")
    one_value(ctx, 4, x.dtype, "Y_zero_point")
    return [(x.dtype, x.shape)]


def check_binary(node: Node, ctx: InferContext):
    """Inference of QLinearAdd / QLinearMul: A, A_scale, A_zero_point?, B, B_scale,
    B_zero_point?, C_scale, C_zero_point?, broadcasting A and B."""
    a, b = ctx.inp(0), ctx.inp(3)
    if a.dtype not in INT8S:
        raise ctx.fail(f"A type {a.dtype} is not int8 or uint8")
    if b.dtype != a.dtype:
        raise ctx.fail(f"B type {b.dtype} differs from A type {a.dtype}")
    for i, what, t in ((1, "A_scale", dt.FLOAT), (2, "A_zero_point", a.dtype), (4, "B_scale", dt.FLOAT),
                       (5, "B_zero_point", a.dtype), (6, "C_scale", dt.FLOAT), (7, "C_zero_point", a.dtype)):
        one_value(ctx, i, t, what)
    return [(a.dtype, broadcast_shapes(ctx.dims, a.shape, b.shape))]


def constant_in_span(t: TensorRef, out: TensorRef) -> bool:
    """Whether ``t`` holds one value along the innermost axis of out that has more than one
    element: onnxruntime's broadcasting then hands its kernel that operand as a scalar."""
    if t.numel == 1:
        return True
    pad = out.rank - t.rank
    for axis in range(out.rank - 1, -1, -1):
        if out.dims[axis] == 1:
            continue
        return axis < pad or t.dims[axis - pad] == 1
    return False


def check_integer_matmul(ctx: InferContext, a: Value, b: Value, b_scale: int, b_zero: int, bias: int):
    """Shapes of MatMulIntegerToFloat / DynamicQuantizeMatMul: A [..., K] times a matrix B [K, N];
    b_scale and b_zero_point hold one value or one per column, bias one per column."""
    if len(b.shape) != 2:
        raise UnsupportedError(f"{ctx.node.label}: B of rank {len(b.shape)} (onnxc takes a matrix B)")
    if len(a.shape) < 1:
        raise ctx.fail("A must have at least one dim")
    k, n = b.shape
    ctx.dims.same(a.shape[-1], k)
    for i, what in ((b_scale, "b_scale"), (b_zero, "b_zero_point"), (bias, "bias")):
        if not ctx.has(i):
            continue
        shape = ctx.inp(i).shape
        per_column = len(shape) == 1 and (shape[0] == n or (i != bias and shape[0] == 1))
        if not (per_column or (len(shape) == 0 and i != bias)):
            raise ctx.fail(f"{what} shape {list(shape)} must be {'[N]' if i == bias else 'a scalar or [N]'} (N = {n})")
    return (*a.shape[:-1], n)


def integer_matmul_kernel(k: KernelContext, b_scale: TensorRef, b_zero: TensorRef | None,
                          bias: TensorRef | None, a_value: str, **data: Any) -> Kernel:
    """The ``c/matmul_integer_to_float.c.j2`` kernel of A (input 0) times B (input 1); ``a_value``
    is A's element ``A[row * K + k]`` as an int32 C expression (``{A}`` stands for it), and
    ``data`` says where scale_a and az come from."""
    a, b = k.input(0), k.input(1)
    n = cexpr.lit(b.dims[1])
    column = "n" if b_zero is not None and b_zero.numel != 1 else "0"
    b_zero_c = "0" if b_zero is None else f"(int32_t){b_zero.name}[{column}]"
    scale = f"{b_scale.name}[{'i % ' + str(n) if b_scale.numel != 1 else '0'}]"
    y_store = f"onnxc_mul_rn((float)(int32_t)y[i], scale_a * {scale})" + (
        f" + {bias.name}[i % {n}]" if bias is not None else "")
    kernel = matmul_kernel(k, _gemm.UINT32,
                           a_load=f"(uint32_t)({a_value.format(A=a.name + '[row * {K} + k]')} - az)",
                           b_load=f"(uint32_t)((int32_t){b.name}[i] - {b_zero_c})", y_store=y_store)
    kernel.template = "c/matmul_integer_to_float.c.j2"
    kernel.data.update(data, a=a.name, a_count=cexpr.lit(a.numel))
    kernel.helpers += [HELPER]
    return kernel
