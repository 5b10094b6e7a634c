"""Shared machinery of the quantization ops (QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, QLinearConv): the quantized types and their
ranges, the layout of scales and zero points (per tensor, per axis, blocked), and
the C expressions that quantize (round half to even, saturate) and dequantize.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import KernelContext, TensorRef
from ...codegen.names import c_string
from ...codegen.uses import fill
from .. import dtypes as dt
from ..errors import ShapeError

HELPER = "c/helpers/quantize.c.j2"
ROUND_HELPER = "c/helpers/round_half.c.j2"


@dataclass(frozen=True)
class QuantType:
    """How values are quantized to one element type: integers round half to even and
    saturate to [lo, hi]; narrow floats convert (helper ``onnxc_f32_to_<fn>``), saturating
    when the saturate attribute says so."""
    lo: int = 0
    hi: int = 0
    fn: Optional[str] = None
    adds_zero: bool = True     # float8 types ignore the zero point (it must be 0)


# Output types of quantization: one entry per type.
QUANT_TYPES: dict[dt.DType, QuantType] = {
    dt.INT8: QuantType(-128, 127),
    dt.UINT8: QuantType(0, 255),
    dt.INT16: QuantType(-32768, 32767),
    dt.UINT16: QuantType(0, 65535),
    dt.INT4: QuantType(-8, 7),
    dt.UINT4: QuantType(0, 15),
    dt.INT2: QuantType(-2, 1),
    dt.UINT2: QuantType(0, 3),
    dt.FLOAT8E4M3FN: QuantType(fn="f8e4m3fn", adds_zero=False),
    dt.FLOAT8E4M3FNUZ: QuantType(fn="f8e4m3fnuz", adds_zero=False),
    dt.FLOAT8E5M2: QuantType(fn="f8e5m2", adds_zero=False),
    dt.FLOAT8E5M2FNUZ: QuantType(fn="f8e5m2fnuz", adds_zero=False),
    dt.FLOAT4E2M1: QuantType(fn="f4e2m1"),
}

# Types DequantizeLinear reads (quantized types and int32 accumulators).
DEQUANT_TYPES: tuple[dt.DType, ...] = tuple(QUANT_TYPES) + (dt.INT32,)

# Types of dequantized values, and of scales (float only before opset 19).
FLOAT_TYPES: tuple[dt.DType, ...] = (dt.FLOAT, dt.FLOAT16, dt.BFLOAT16)
SCALE_TYPES: tuple[dt.DType, ...] = FLOAT_TYPES + (dt.FLOAT8E8M0,)


def saturate(value: str, target: dt.DType) -> str:
    """C expression: the rounded, zero point added double ``value`` saturated to integer type ``target``."""
    q = QUANT_TYPES[target]
    return target.store.format(f"({target.compute})onnxc_quant_clamp({value}, {q.lo}.0, {q.hi}.0)")


def quantize(ratio: str, zero: str, target: dt.DType, saturating: bool, compute: str = "double") -> str:
    """C expression: x / scale (``ratio``, of C type ``compute``) plus the zero point ``zero``
    (``zero_load`` in that type), as ``target``. A float ratio is rounded and saturated in
    float, which gives the double computation's values: its rounding is exact, and adding a
    zero point of at most 16 bits is exact below 2^24 and saturates alike above (no quantized
    integer type is wider), while vectors of floats hold twice the values."""
    q = QUANT_TYPES[target]
    if q.fn is None and compute == "float":
        return target.store.format(f"({target.compute})onnxc_quant_clampf(rintf({ratio}) + {zero}, "
                                   f"{q.lo}.0f, {q.hi}.0f)")
    if q.fn is None:
        return saturate(f"rint((double)({ratio})) + {zero}", target)
    value = f"{ratio} + {zero}" if q.adds_zero else ratio
    return f"onnxc_f32_to_{q.fn}((float)({value}), {int(saturating)})"


def dequantize(x: TensorRef, zp: Optional[TensorRef], x_index: str, zp_index: str) -> str:
    """C expression: x - zero point as a float (exact in int64 first, rounded once as the reference does)."""
    if x.dtype.compute == "float" or zp is None:
        return f"(float){x.load(x_index)}"
    return f"(float)((int64_t){x.load(x_index)} - (int64_t){zp.load(zp_index)})"


def round_to(expr: str, t: dt.DType) -> str:
    """A float ``expr`` rounded to the precision of ``t`` (the helpers of ``c/helpers/round_half.c.j2``)."""
    if t is dt.FLOAT16:
        return fill("onnxc_round_f16({})", expr)
    if t is dt.BFLOAT16:
        return fill("onnxc_round_bf16({})", expr)
    return expr


def compute_of(t: dt.DType) -> str:
    """C type arithmetic in ``t`` happens in (double for double and integers)."""
    return "float" if t.compute == "float" else "double"


@dataclass
class Layout:
    """How a scale (and zero point) tensor maps onto the elements of x."""
    mode: str          # "tensor", "axis" or "block"
    axis: int
    block: int


def layout(x: tuple, scale: tuple, axis: int, block: int, fail: Callable[[str], ShapeError],
           same: Callable[[Any, Any], Any]) -> Layout:
    """Checks the scale shape against x; ``same`` unifies two dims (raising on a mismatch)."""
    if len(scale) == 0 or (all(isinstance(d, int) for d in scale) and cexpr.prod(scale) == 1 and not block):
        return Layout("tensor", 0, 0)
    rank = len(x)
    if not -rank <= axis < rank:
        raise fail(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    try:
        if block:
            if block < 0:
                raise fail(f"block_size must be positive, got {block}")
            if len(scale) != rank:
                raise fail(f"blocked scale must have x's rank {rank}, got shape {list(scale)}")
            for a, (d, s) in enumerate(zip(x, scale)):
                if a != axis:
                    same(d, s)
                elif isinstance(d, int) and isinstance(s, int) and s != -(-d // block):
                    raise fail(f"blocked scale has {s} blocks on axis {axis}, x needs {-(-d // block)}")
            return Layout("block", axis, block)
        if len(scale) != 1:
            raise fail(f"scale must be a scalar or a vector, got shape {list(scale)}")
        same(x[axis], scale[0])
    except ShapeError as e:
        raise fail(f"scale shape {list(scale)} does not fit x shape {list(x)}: {e}") from None
    return Layout("axis", axis, 0)


def loop_data(k: KernelContext, op: str, x: TensorRef, params: list[TensorRef], lay: Layout) -> dict[str, Any]:
    """Template data of ``c/quantize.c.j2``: loops over x as outer x axis x inner, where the
    scale index is ``q`` (per axis position) plus ``i`` (inner position) for blocked scales."""
    checks = []
    dims = x.dims
    if lay.mode == "tensor":
        outer, along, inner, base = 1, 1, x.numel, "0"
    else:
        outer = cexpr.prod(dims[:lay.axis])
        along = dims[lay.axis]
        inner = cexpr.prod(dims[lay.axis + 1:])
        if lay.mode == "axis":
            base = "a"
        else:
            blocks = params[0].dims[lay.axis]
            base = f"(o * {cexpr.lit(blocks)} + a / {lay.block}) * {cexpr.lit(inner)}"
    for p in params:
        if lay.mode == "tensor":
            pairs = [(p.numel, 1)]
        elif lay.mode == "axis":
            pairs = [(p.dims[0], along)]
        else:
            d = dims[lay.axis]
            n_blocks = -(-d // lay.block) if isinstance(d, int) else f"onnxc_dim_ceildiv({d}, {lay.block})"
            pairs = [(h, n_blocks if a == lay.axis else dims[a]) for a, h in enumerate(p.dims)]
        for have, want in pairs:
            if not (isinstance(have, int) and isinstance(want, int)):
                checks.append({"cond": f"{cexpr.lit(have)} != {cexpr.lit(want)}",
                               "msg": c_string(f"{op}: {p.name} does not fit the shape of {x.name}")})
    return {"checks": checks, "outer": cexpr.lit(outer), "along": cexpr.lit(along), "inner": cexpr.lit(inner),
            "base": base, "blocked": lay.mode == "block", "per_tensor": lay.mode == "tensor",
            "work": cexpr.lit(x.numel), "x": x.name, "y": k.out.name}


def zero_load(zp: Optional[TensorRef], index: str, ctype: str = "double") -> str:
    """The zero point at ``index`` as a ``ctype`` (double or float; 0 when absent)."""
    if zp is None:   # (names zp only where written)
        return "0.0" if ctype == "double" else "0.0f"
    return f"({ctype})" + zp.load(index)


# --- requantization of int32 accumulators (QLinearConv, QLinearMatMul, QGemm) ---------------

REQUANT_HELPER = "c/helpers/requant.c.j2"
REQUANT_FIXED_HELPER = "c/helpers/requant_fixed.c.j2"

# CompileOptions.requantize: onnxruntime's float32 arithmetic, or TFLite's (and CMSIS-NN's)
# fixed-point multiplier and shift.
REQUANTIZE_MODES = ("float", "fixed_point")


@dataclass(frozen=True)
class OutputScale:
    """The constant requantization parameters of each output channel, as kernel parameter
    names: the float32 multiplier's bits (``onnxc_requant``), or the fixed-point multiplier and
    shift (``onnxc_requant_fixed``)."""
    bits: Optional[str] = None
    multiplier: Optional[str] = None
    shift: Optional[str] = None



def requant_helpers(scale: Optional[OutputScale]) -> list[str]:
    """The helper templates ``requant``'s expression calls."""
    fixed = scale is not None and scale.multiplier is not None
    return [REQUANT_HELPER] + ([REQUANT_FIXED_HELPER] if fixed else [])


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: ``real`` = multiplier * 2^(shift - 31), the multiplier a
    31-bit mantissa in [2^30, 2^31) rounded half away from zero; a multiplier whose shift
    would be below -31 is flushed to (0, 0), as TFLite does."""
    if real == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real)
    fixed = math.floor(abs(mantissa) * 2.0 ** 31 + 0.5)   # exact: the mantissa has 53 bits
    fixed = int(math.copysign(fixed, mantissa))
    if fixed == 2 ** 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def output_scale(k: KernelContext, *factors: TensorRef, divisor: Optional[TensorRef],
                      alpha: float = 1.0) -> Optional[OutputScale]:
    """The multiplier ``alpha * f0 * f1 * ... / divisor`` of each output channel as constant
    parameters. In float mode, multiplied and divided in that order in float32 as onnxruntime
    does, as its bits (uint32) for ``onnxc_requant``; None when a scale is not a constant
    float32 or a multiplier is not a positive normal float32 (then the kernel computes it at
    run time and requantizes in float). In fixed-point mode (``Target.requantize``), computed in
    double as TFLite does and split by ``quantize_multiplier``; scales that are not constant
    float32, or multipliers that are not positive or reach 2^30, are refused."""
    if k.target.requantize == "fixed_point":
        return _fixed_point_scale(k, factors, divisor, alpha)
    values = []
    for t in factors + ((divisor,) if divisor is not None else ()):
        if t.value is None or t.dtype is not dt.FLOAT:
            return None
        values.append(np.asarray(t.value, np.float32).reshape(-1))
    with np.errstate(all="ignore"):
        m = np.full(1, alpha, np.float32) if alpha != 1.0 else None
        for v in values[:len(factors)]:
            m = v if m is None else (m * v).astype(np.float32)
        if divisor is not None:
            m = (m / values[-1]).astype(np.float32)
    if not np.all(np.isfinite(m) & (m >= np.finfo(np.float32).tiny)):
        return None
    return OutputScale(bits=k.constant("output_scale", np.ascontiguousarray(m, np.float32).view(np.uint32)))


def _fixed_point_scale(k: KernelContext, factors: tuple[TensorRef, ...], divisor: Optional[TensorRef],
                       alpha: float) -> OutputScale:
    values = []
    for t in factors + ((divisor,) if divisor is not None else ()):
        if t.value is None or t.dtype is not dt.FLOAT:
            raise k.unsupported(f"fixed-point requantization needs constant float32 scales ({t.name} is not)")
        values.append(np.asarray(t.value, np.float32).reshape(-1).astype(np.float64))
    with np.errstate(all="ignore"):
        m = np.full(1, float(np.float32(alpha)))
        for v in values[:len(factors)]:
            m = m * v
        if divisor is not None:
            m = m / values[-1]
    if not np.all(np.isfinite(m) & (m > 0) & (m < 2.0 ** 30)):
        raise k.unsupported("fixed-point requantization needs output multipliers in (0, 2^30), got "
                            + ", ".join(repr(float(x)) for x in m[:4]) + ("..." if m.size > 4 else ""))
    pairs = np.array([quantize_multiplier(float(x)) for x in m], np.int64)
    return OutputScale(multiplier=k.constant("output_multiplier", pairs[:, 0].astype(np.int32)),
                       shift=k.constant("output_shift", pairs[:, 1].astype(np.int32)))


def requant(acc: str, y: TensorRef, zero: str, scale: Optional[OutputScale], scale_index: str,
            runtime_scale: str) -> str:
    """C expression storing int32 accumulator ``acc`` to quantized ``y``: multiplied by the
    output scale (``scale``'s constants at ``scale_index``, or the float expression
    ``runtime_scale``), rounded (half to even in float mode, as ``onnxc_requant_fixed`` in
    fixed-point mode), plus the zero point ``zero``, saturated to y's type."""
    q = QUANT_TYPES[y.dtype]
    zp = f"(int32_t){zero}"
    if scale is not None and scale.multiplier is not None:
        value = (f"onnxc_requant_fixed({acc}, {scale.multiplier}[{scale_index}], {scale.shift}[{scale_index}], "
                 f"{q.lo} - {zp}, {q.hi} - {zp})")
    elif scale is not None:
        value = f"onnxc_requant({acc}, {scale.bits}[{scale_index}], {q.lo} - {zp}, {q.hi} - {zp})"
    else:
        value = f"onnxc_requant_f({acc}, (float)({runtime_scale}), {q.lo} - {zp}, {q.hi} - {zp})"
    return f"({y.dtype.c_type})({value} + {zp})"
