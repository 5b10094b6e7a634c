"""Shared machinery of Resize and Upsample: output sizes, per-axis scales and the
``c/resize.c.j2`` kernel.

The kernel first builds, for every resized axis, a table of source indices and
weights per output coordinate (nearest: one index; linear/cubic: ``taps``
indices, clamped to the edge), then walks the output once: nearest gathers,
linear/cubic sum the tensor product of the per-axis weights. Coordinates are
computed in double like the ONNX reference implementation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.uses import fill
from .. import dtypes as dt
from ..dims import Dim
from ..ir import Node
from .registry import InferContext, OpDef

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")
# Coordinate modes that do not map an axis onto itself at scale 1.
NOT_IDENTITY = ("tf_crop_and_resize", "tf_half_pixel_for_nn")


@dataclass
class ResizeAttrs:
    """Interpolation settings; Resize-10 and Upsample use asymmetric / "simple" nearest."""
    mode: str
    coord: str = "asymmetric"
    nearest: str = "simple"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    extrapolation: float = 0.0
    antialias: bool = False
    policy: str = "stretch"
    axes: Optional[tuple[int, ...]] = None


@dataclass
class Scale:
    """One axis's scale: a C double expression, its value when known, whether to check it at run time."""
    expr: str
    value: Optional[float] = None
    check: bool = False


@dataclass
class Sizing:
    """Where the output size comes from: ``kind`` "scales" or "sizes", from input ``index``
    (None: the values are an attribute) with constant ``values`` when known."""
    kind: str
    index: Optional[int]
    values: Optional[np.ndarray]


def attrs_from_node(node: Node) -> ResizeAttrs:
    a = node.attrs
    mode = a.get("mode", "nearest")
    if mode == "bilinear":  # Upsample-1 spelling
        mode = "linear"
    return ResizeAttrs(mode=mode, coord=a.get("coordinate_transformation_mode", "asymmetric"),
                       nearest=a.get("nearest_mode", "simple"), cubic_a=float(a.get("cubic_coeff_a", -0.75)),
                       exclude_outside=bool(a.get("exclude_outside", 0)),
                       extrapolation=float(a.get("extrapolation_value", 0.0)),
                       antialias=bool(a.get("antialias", 0)), policy=a.get("keep_aspect_ratio_policy", "stretch"),
                       axes=a.get("axes"))


def check_attrs(ctx: InferContext, attrs: ResizeAttrs, x_dtype: dt.DType, rank: int) -> list[int]:
    """Validates the settings; returns the resized axes (normalized)."""
    if attrs.mode not in MODES:
        raise ctx.fail(f"mode {attrs.mode!r} is not one of {', '.join(MODES)}")
    if attrs.coord not in COORD_MODES:
        raise ctx.fail(f"coordinate_transformation_mode {attrs.coord!r} is not supported")
    if attrs.mode == "nearest" and attrs.nearest not in NEAREST_MODES + ("simple",):
        raise ctx.fail(f"nearest_mode {attrs.nearest!r} is not supported")
    if attrs.policy not in POLICIES:
        raise ctx.fail(f"keep_aspect_ratio_policy {attrs.policy!r} is not supported")
    if attrs.mode != "nearest" and x_dtype not in dt.NUMERIC:
        raise ctx.fail(f"{attrs.mode} interpolation of {x_dtype} is not supported")
    if x_dtype not in dt.ALL:
        raise ctx.fail(f"input type {x_dtype} is not supported")
    if attrs.axes is None:
        return list(range(rank))
    axes = []
    for a in attrs.axes:
        if not -rank <= a < rank:
            raise ctx.fail(f"axis {a} is out of range for rank {rank}")
        a = a % rank
        if a in axes:
            raise ctx.fail(f"axis {a} is repeated")
        axes.append(a)
    return axes


def sizing_of(ctx: InferContext, scales_index: Optional[int], sizes_index: Optional[int], count: int) -> Sizing:
    """The non-empty one of the scales / sizes inputs (1-D, one entry per resized axis)."""
    def present(i: Optional[int]) -> bool:
        if i is None or not ctx.has(i):
            return False
        shape = ctx.inp(i).shape
        return not (len(shape) == 1 and shape[0] == 0)
    has_scales, has_sizes = present(scales_index), present(sizes_index)
    if has_scales == has_sizes:
        raise ctx.fail("exactly one of scales and sizes must be given (non-empty)")
    kind, index = ("scales", scales_index) if has_scales else ("sizes", sizes_index)
    v = ctx.inp(index)
    want = dt.FLOAT if kind == "scales" else dt.INT64
    if v.dtype != want:
        raise ctx.fail(f"{kind} must be {want}, got {v.dtype}")
    if len(v.shape) != 1 or v.shape[0] != count:
        raise ctx.fail(f"{kind} must be 1-D with {count} entries, got shape {v.shape}")
    return Sizing(kind, index, ctx.const(index))


def infer_out_shape(ctx: InferContext, node: Node, in_shape: tuple, axes: list[int], attrs: ResizeAttrs,
                    sizing: Sizing) -> tuple:
    out: list[Dim] = list(in_shape)
    values = sizing.values
    if sizing.kind == "sizes" and values is not None and (values < 0).any():
        raise ctx.fail(f"sizes must not be negative, got {values.tolist()}")
    if sizing.kind == "scales" and values is not None and not (values > 0).all():
        raise ctx.fail(f"scales must be positive, got {values.tolist()}")
    aspect = _static_aspect(in_shape, axes, attrs, sizing)
    for pos, a in enumerate(axes):
        d = in_shape[a]
        if values is None:
            out[a] = ctx.dims.data(node.name or node.op_type)
        elif sizing.kind == "scales":
            s = float(values[pos])
            if isinstance(d, int):
                out[a] = int(math.floor(s * d))
            elif s.is_integer():
                out[a] = ctx.dims.mul(d, int(s))
            else:
                out[a] = ctx.dims.data(node.name or node.op_type)
        elif attrs.policy == "stretch":
            out[a] = int(values[pos])
            if d == 0 and out[a] != 0:
                raise ctx.fail(f"cannot resize the empty axis {a} to size {out[a]}")
        elif aspect is not None:
            out[a] = int(aspect * d + 0.5)
        else:
            out[a] = ctx.dims.data(node.name or node.op_type)
    return tuple(out)


def _static_aspect(in_shape: tuple, axes: list[int], attrs: ResizeAttrs, sizing: Sizing) -> Optional[float]:
    """The common scale of keep_aspect_ratio_policy when sizes and the resized dims are known."""
    if sizing.kind != "sizes" or attrs.policy == "stretch" or sizing.values is None:
        return None
    if not all(isinstance(in_shape[a], int) and in_shape[a] > 0 for a in axes):
        return None
    ratios = [int(sizing.values[pos]) / in_shape[a] for pos, a in enumerate(axes)]
    return min(ratios) if attrs.policy == "not_larger" else max(ratios)


# --- lowering ------------------------------------------------------------------

def _double(x: float) -> str:
    """A C double literal that round-trips."""
    if not math.isfinite(x):
        return "NAN" if math.isnan(x) else ("INFINITY" if x > 0 else "-INFINITY")
    text = repr(float(x))
    return text if any(c in text for c in ".en") else text + ".0"


def lower_resize(node: Node, k: KernelContext, attrs: ResizeAttrs, axes: list[int], sizing: Sizing,
                 roi_index: Optional[int] = None) -> Kernel:
    x, y = k.input(0), k.out
    rank = x.rank
    in_shape = tuple(x.shape)
    values = sizing.values
    array = k.input(sizing.index).name if sizing.index is not None else None
    aspect_const = _static_aspect(in_shape, axes, attrs, sizing)
    uses_aspect = sizing.kind == "sizes" and attrs.policy != "stretch" and aspect_const is None

    def scale_of(pos: int, a: int) -> Scale:
        d = in_shape[a]
        if sizing.kind == "scales":
            if values is not None:
                return Scale(_double(float(values[pos])), float(values[pos]))
            return Scale("(double)" + array + f"[{pos}]", check=True)
        if attrs.policy != "stretch":
            return Scale(_double(aspect_const), aspect_const) if aspect_const is not None else Scale("aspect")
        if values is not None and isinstance(d, int):
            value = int(values[pos]) / d if d else 1.0
            return Scale(_double(value), value)
        size = str(int(values[pos])) if values is not None else array + f"[{pos}]"
        if isinstance(d, int):
            return Scale(fill("(double){} / {}", size, _double(d)) if d else "1.0")
        in_c = k.dim(d)
        return Scale(fill("({0} != 0 ? (double){1} / (double){0} : 1.0)", in_c, size))

    aspect = None
    if uses_aspect:
        aspect = {"op": "fmin" if attrs.policy == "not_larger" else "fmax",
                  "init": "INFINITY" if attrs.policy == "not_larger" else "0.0",
                  "terms": [{"size": array + f"[{pos}]", "in": cexpr.lit(x.dims[a])} for pos, a in enumerate(axes)]}

    roi = None
    if attrs.coord == "tf_crop_and_resize":
        if roi_index is None or not k.has_input(roi_index):
            raise k.unsupported("tf_crop_and_resize needs the roi input")
        r = k.input(roi_index)
        if r.rank != 1 or r.dims[0] != 2 * len(axes):
            raise k.unsupported(f"roi must have {2 * len(axes)} entries, got shape {r.shape}")
        roi = r

    support = {"nearest": 0, "linear": 1, "cubic": 2}[attrs.mode]
    tables = []
    entries: cexpr.CExpr = 0
    for pos, a in enumerate(axes):
        in_d, out_d = x.dims[a], y.dims[a]
        scale = scale_of(pos, a)
        if scale.value == 1.0 and in_d == out_d and attrs.coord not in NOT_IDENTITY:
            continue  # known identity axis: walked like an axis that is not resized
        if attrs.mode == "nearest":
            cap: cexpr.CExpr = 1
        elif not attrs.antialias:
            cap = 2 * support
        elif scale.value is not None:
            cap = 2 * math.ceil(support / min(scale.value, 1.0))
        else:
            # The stretched filter has 2 * ceil(support / min(scale, 1)) taps; scale >= out / (2 * in)
            # for every way of choosing the output size, which bounds the taps by the dims.
            cap = cexpr.add(cexpr.mul(2, cexpr.call("onnxc_dim_ceildiv", cexpr.mul(4 * support, in_d),
                                                    cexpr.call("onnxc_dim_max", out_d, 1))), 2)
        tables.append({"axis": a, "in": cexpr.lit(in_d), "out": cexpr.lit(out_d), "stride": cexpr.lit(x.strides[a]),
                       "empty_check": not (isinstance(in_d, int) and isinstance(out_d, int)),
                       "scale": scale.expr, "check": scale.check, "cap": cexpr.lit(cap),
                       "roi_start": roi.load(str(pos)) if roi is not None else None,
                       "roi_end": roi.load(str(pos + len(axes))) if roi is not None else None})
        entries = cexpr.add(entries, cexpr.mul(out_d, cap))

    by_axis = {t["axis"]: t for t in tables}
    # float32 bilinear over the last two axes (a segmentation head's upsampling): separable
    # loops in float (c/resize.c.j2), where the general pass folds every output's four taps in
    # double through the tables
    # (an outer axis with a table, its size known only at run time, must be an identity then)
    bilinear = None
    outer = sorted(set(by_axis) - {rank - 2, rank - 1})
    if attrs.mode == "linear" and not attrs.antialias and roi is None and x.dtype is dt.FLOAT \
            and y.dtype is dt.FLOAT and rank >= 2 and {rank - 2, rank - 1} <= set(by_axis) \
            and (not outer or attrs.coord not in NOT_IDENTITY):
        bilinear = {"h": rank - 2, "w": rank - 1, "outer": outer, "planes": cexpr.lit(cexpr.prod(y.dims[:-2]))}
    loops = [{"axis": a, "out": cexpr.lit(y.dims[a]), "stride": cexpr.lit(x.strides[a]), "resized": a in by_axis}
             for a in range(rank)]
    mode = attrs.mode if tables else "nearest"
    data = {
        "mode": mode, "coord": attrs.coord, "nearest": attrs.nearest, "cubic_a": _double(attrs.cubic_a),
        "support": support, "exclude_outside": attrs.exclude_outside,
        "antialias": attrs.antialias and mode != "nearest", "identity_check": attrs.coord not in NOT_IDENTITY,
        "extrapolate": roi is not None, "extrapolation": _extrapolation_literal(attrs.extrapolation, y.dtype),
        "aspect": aspect if any(t["scale"] == "aspect" for t in tables) else None,
        "tables": tables, "loops": loops, "X": x.name, "Y": y.name, "load": x.load("SRC"),
        "store": _store_template(y.dtype), "bilinear": bilinear,
    }
    kernel = k.kernel("c/resize.c.j2", **data)
    if tables:
        kernel.scratch = {"index": cexpr.mul(entries, 8)}
        if mode != "nearest":
            kernel.scratch["weight"] = cexpr.mul(entries, 8)
        if bilinear is not None:   # the width's weights in float, then a blended source row per thread
            # (each rounded up to whole 64-byte lines)
            # (a thread's: a blended source row, or two source rows resized along the width)
            per_thread = cexpr.add(x.dims[rank - 1], 16, cexpr.mul(2, cexpr.add(y.dims[rank - 1], 16)))
            kernel.scratch["row"] = cexpr.mul(cexpr.add(cexpr.mul(per_thread, k.target.threads),
                                                        cexpr.mul(2, y.dims[rank - 1]), 16), 4)
    if k.data_dims:
        kernel.shape_template = "c/resize_shape.c.j2"
        kernel.shape_data = {"aspect": aspect, "sizes": _data_dims(k, axes, sizing, scale_of, array)}
    return kernel


def _data_dims(k: KernelContext, axes: list[int], sizing: Sizing, scale_of: Callable[[int, int], Scale],
               array: Optional[str]) -> list[dict]:
    """How each data-dependent output dim is computed (in data_dims order)."""
    x, y = k.input(0), k.out
    where = {f"out_{y.dims[a]}": (pos, a) for pos, a in enumerate(axes) if isinstance(y.dims[a], str)}
    out = []
    for var in k.data_dims:
        pos, a = where[var]
        scale = scale_of(pos, a)
        in_c = cexpr.lit(x.dims[a])
        if sizing.kind == "scales":
            out.append({"var": var, "kind": "scaled", "scale": scale.expr, "check": scale.check,
                        "expr": fill("floor(scale * (double){})", in_c)})
        elif scale.expr == "aspect":
            out.append({"var": var, "kind": "scaled", "scale": scale.expr, "check": False,
                        "expr": fill("floor(scale * (double){} + 0.5)", in_c)})
        else:
            out.append({"var": var, "kind": "size", "size": array + f"[{pos}]"})
    return out


def _extrapolation_literal(value: float, t: dt.DType) -> str:
    if t.is_float:
        return t.store.format(_double(value) if t is dt.DOUBLE or not math.isfinite(value) else _double(value) + "f")
    if t is dt.BOOL:
        return "1" if value != 0 else "0"
    info = np.iinfo(t.np)
    v = int(np.clip(np.round(value), info.min, info.max)) if math.isfinite(value) else 0
    if v == info.min and t is dt.INT64:
        return "INT64_MIN"
    return cexpr.lit(v) if t.is_signed or v <= 2**31 - 1 else f"UINT64_C({v})"


def _store_template(t: dt.DType) -> dict:
    """How a double result becomes an element: floats convert, ints round half to even and saturate."""
    if t.is_float:
        return {"int": False, "expr": t.store.format("acc" if t is dt.DOUBLE else "(float)acc")}
    info = np.iinfo(t.np)
    bits = t.itemsize * 8
    lo = "0" if info.min == 0 else f"INT{bits}_MIN"
    hi = f"UINT{bits}_MAX" if info.min == 0 else f"INT{bits}_MAX"
    # Doubles at or beyond these bounds saturate (2^63 / 2^64 for 64-bit types, exact otherwise).
    lo_d = _double(float(info.min))
    hi_d = _double(float(2 ** bits if info.min == 0 else 2 ** (bits - 1))) if bits == 64 else _double(float(info.max))
    return {"int": True, "lo": lo, "hi": hi, "lo_d": lo_d, "hi_d": hi_d, "ctype": t.c_type}


class ResizeBase(OpDef):
    """Resize and Upsample: subclasses read their version's attributes and inputs in ``_setup``."""
    roi_index: ClassVar[Optional[int]] = None

    def _setup(self, node: Node, ctx: InferContext) -> tuple[ResizeAttrs, list[int], Sizing]:
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        attrs, axes, sizing = self._setup(node, ctx)
        return [(x.dtype, infer_out_shape(ctx, node, x.shape, axes, attrs, sizing))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        attrs, axes, sizing = self._setup(node, InferContext(node, None))
        return lower_resize(node, k, attrs, axes, sizing, roi_index=self.roi_index)
