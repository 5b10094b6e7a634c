"""Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops:
attribute checks, pads from ``auto_pad``, output sizes (symbolic-aware) and the
per-axis data the ``c/conv.c.j2`` / ``c/pool.c.j2`` families loop over.

Pads may be negative (SAME with a kernel smaller than the stride crops), which
the kernels handle like any other window start: every input position is
bounds-checked per axis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence

from ...codegen import cexpr
from ...codegen.cexpr import CExpr, math_fn
from ...codegen.literals import float_literal
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from .. import dtypes as dt
from ..dims import Dim, DimTable
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import check_dtype
from ._pool_planes import pool_planes
from .registry import InferContext, OpDef

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Window:
    """A node's window attributes for ``rank`` spatial axes, defaults filled in."""
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]          # explicit pads: begins then ends (zeros unless auto_pad is NOTSET)
    auto_pad: str
    ceil_mode: bool

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def extent(self, a: int) -> int:
        """Span of the dilated kernel along axis ``a``."""
        return (self.kernel[a] - 1) * self.dilations[a] + 1


def window(node: Node, rank: int, kernel: Sequence[Any], fail: Callable[[str], ShapeError],
           ceil_mode: bool = False) -> Window:
    """Read and check kernel_shape (or the given kernel), strides, dilations, pads and auto_pad."""
    attrs = node.attrs
    given = attrs.get("kernel_shape")
    if given:
        if len(given) != rank:
            raise fail(f"kernel_shape {list(given)} must have {rank} values")
        if any(isinstance(k, int) and k != g for k, g in zip(kernel, given)):
            raise fail(f"kernel_shape {list(given)} does not match the weights {list(kernel)}")
        kernel = given
    if any(not isinstance(k, int) for k in kernel):
        raise fail(f"kernel shape {list(kernel)} must be static")
    if any(k < 1 for k in kernel):
        raise fail(f"kernel shape {list(kernel)} must be positive")

    def ints(name: str, count: int, default: int, minimum: int) -> tuple[int, ...]:
        values = attrs.get(name) or (default,) * count
        if len(values) != count:
            raise fail(f"{name} {list(values)} must have {count} values")
        if any(v < minimum for v in values):
            raise fail(f"{name} {list(values)} must be at least {minimum}")
        return tuple(int(v) for v in values)

    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise fail(f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    pads = ints("pads", 2 * rank, 0, 0)
    if auto_pad != "NOTSET":
        pads = (0,) * (2 * rank)
    return Window(tuple(int(k) for k in kernel), ints("strides", rank, 1, 1), ints("dilations", rank, 1, 1),
                  pads, auto_pad, bool(ceil_mode))


def output_dims(win: Window, dims: DimTable, in_dims: Sequence[Dim]) -> list[Dim]:
    """Spatial output dims of a convolution or pooling window over ``in_dims``."""
    out: list[Dim] = []
    for a, x in enumerate(in_dims):
        s, ext = win.strides[a], win.extent(a)
        if win.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(dims.ceildiv(x, s))
            continue
        begin, end = win.pads[a], win.pads[win.rank + a]
        span = dims.add(x, begin + end - ext)
        if win.ceil_mode:
            o = dims.add(dims.ceildiv(span, s), 1)
            # The last window must start inside the input or the begin padding.
            o = dims.expr("min", o, dims.ceildiv(dims.add(x, begin), s))
        else:
            o = dims.add(dims.floordiv(span, s), 1)
        if isinstance(o, int) and o < 0:
            raise ShapeError(f"input size {x} is smaller than the window ({ext}) on spatial axis {a}")
        out.append(o)
    return out


def _c_half(total: CExpr, round_up: bool) -> CExpr:
    """total / 2 with C truncation (as onnxruntime computes SAME pads), rounded up if asked."""
    if isinstance(total, int):
        v = total + 1 if round_up else total
        return abs(v) // 2 * (1 if v >= 0 else -1)
    return f"(({total}{' + 1' if round_up else ''}) / 2)"


def pads_c(win: Window, in_dims: Sequence[CExpr], out_dims: Sequence[CExpr]) -> tuple[list[CExpr], list[CExpr]]:
    """Begin and end pads per spatial axis as C expressions (ints when static)."""
    if win.auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return list(win.pads[:win.rank]), list(win.pads[win.rank:])
    begins: list[CExpr] = []
    ends: list[CExpr] = []
    for a, (x, o) in enumerate(zip(in_dims, out_dims)):
        s, ext = win.strides[a], win.extent(a)
        if isinstance(x, int) and isinstance(o, int):
            total: CExpr = (o - 1) * s + ext - x
        else:
            total = f"(({cexpr.lit(o)} - 1) * {s} + {ext} - {cexpr.lit(x)})"
        begin = _c_half(total, win.auto_pad == "SAME_LOWER")
        begins.append(begin)
        ends.append(total - begin if isinstance(total, int) else f"({total} - {begin})")
    return begins, ends


def axes_data(win: Window, in_dims: Sequence[CExpr], out_dims: Sequence[CExpr],
              begins: Sequence[CExpr], ends: Optional[Sequence[CExpr]] = None) -> list[dict[str, Any]]:
    """Per spatial axis: kernel k, stride s, dilation d, pads p (begin) / pe (end), in/out sizes."""
    ends = ends if ends is not None else [0] * win.rank
    return [{"k": win.kernel[a], "s": win.strides[a], "d": win.dilations[a], "p": cexpr.lit(begins[a]),
             "pe": cexpr.lit(ends[a]), "i": cexpr.lit(in_dims[a]), "o": cexpr.lit(out_dims[a])}
            for a in range(win.rank)]


def affine(*terms: tuple[str, CExpr], const: CExpr = 0) -> str:
    """C text of sum(var * coef) + const, dropping unit factors and zero terms: o0 * 2 + k0 - 1."""
    parts: list[str] = []
    for var, coef in terms:
        if coef == 0:
            continue
        parts.append(var if coef == 1 else f"{var} * {cexpr.lit(coef)}")
    if isinstance(const, int):
        if const or not parts:
            parts.append(f"- {-const}" if const < 0 and parts else str(const))
    else:
        parts.append(f"- {const[1:]}" if const.startswith("-") and parts else const)
    return " + ".join(parts).replace("+ - ", "- ")


def negate(x: CExpr) -> CExpr:
    return -x if isinstance(x, int) else f"-{x}"


def per_group(total: CExpr, group: int) -> CExpr:
    """Channels per group (``total`` is a multiple of ``group``)."""
    return cexpr.div(total, group)


def flat_index(names: Sequence[str], sizes: Sequence[CExpr]) -> str:
    """Row-major flat index of positions ``names`` in a box of ``sizes``: ((a * S1 + b) * S2 + c)."""
    expr = names[0]
    for name, size in zip(names[1:], sizes[1:]):
        expr = f"({expr} * {cexpr.lit(size)} + {name})"
    return expr


def row_offset(names: Sequence[str], sizes: Sequence[CExpr]) -> str:
    """Flat offset of the row (last axis) at positions ``names`` of the leading axes."""
    if len(sizes) == 1:
        return "0"
    return f"{flat_index(names, sizes[:-1])} * {cexpr.lit(sizes[-1])}"


def conv_shape(node: Node, dims: DimTable, x_shape: tuple, w_shape: tuple,
               fail: Callable[[str], ShapeError]) -> tuple:
    """Output shape of Conv / ConvInteger: (N, M, spatial...)."""
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise fail(f"X {list(x_shape)} and W {list(w_shape)} must have the same rank, at least 3")
    group = node.attrs.get("group", 1)
    if group < 1:
        raise fail(f"group {group} must be positive")
    rank = len(x_shape) - 2
    win = window(node, rank, w_shape[2:], fail)
    m, cg = w_shape[0], w_shape[1]
    if isinstance(m, int) and m % group:
        raise fail(f"W has {m} output channels, not a multiple of group {group}")
    try:
        dims.same(x_shape[1], dims.mul(cg, group))
        spatial = output_dims(win, dims, x_shape[2:])
    except ShapeError as e:
        raise fail(str(e)) from None
    return (x_shape[0], m, *spatial)


# ---- pooling ---------------------------------------------------------------------

class Pool(OpDef):
    """Shared inference and lowering of MaxPool, AveragePool and LpPool (``c/pool.c.j2``)."""
    kind: ClassVar[str] = ""                       # "max" | "avg" | "lp"
    types: ClassVar[Sequence[dt.DType]] = dt.FLOATS

    def window(self, node: Node, rank: int, fail: Callable[[str], ShapeError]) -> Window:
        kernel = node.attrs.get("kernel_shape")
        if not kernel:
            raise fail("kernel_shape is required")
        return window(node, rank, kernel, fail, ceil_mode=bool(node.attrs.get("ceil_mode", 0)))

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, self.types)
        if len(x.shape) < 3:
            raise ctx.fail(f"X must have a batch, a channel and spatial axes, got shape {list(x.shape)}")
        win = self.window(node, len(x.shape) - 2, ctx.fail)
        try:
            shape = (x.shape[0], x.shape[1], *output_dims(win, ctx.dims, x.shape[2:]))
        except ShapeError as e:
            raise ctx.fail(str(e)) from None
        return [(x.dtype, shape), (dt.INT64, shape)][:len(node.outputs)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        rank = x.rank - 2
        win = self.window(node, rank, k.unsupported)
        in_dims, out_dims = x.dims[2:], y.dims[2:]
        begins, ends = pads_c(win, in_dims, out_dims)
        include_pad = self.kind == "avg" and bool(node.attrs.get("count_include_pad", 0))
        if (len(k.outputs) == 1 and x.dtype in dt.FLOATS and tuple(in_dims) == win.kernel
                and set(win.dilations) == {1} and not any(begins) and not any(ends) and set(out_dims) == {1}):
            # one window over each whole plane (a classifier's AveragePool 7x7 on 7 x 7): the
            # global pool's kernel, rather than the planes' reductions of every window position
            whole = self.whole_plane_reduction(node, x, cexpr.lit(cexpr.prod(in_dims)))
            if whole is not None:
                return global_pool_kernel(k, *whole)
        planes = pool_planes(self.kind, k, win, begins, ends, include_pad)
        if planes is not None:
            return planes
        axes = axes_data(win, in_dims, out_dims, begins, ends)
        for a, axis in enumerate(axes):
            d, h = win.dilations[a], f"h{a}"
            axis["start"] = affine((f"o{a}", win.strides[a]), const=negate(begins[a]))
            axis["pos"] = affine((h, 1), (f"k{a}", d))
            axis["lo"] = f"-{h}" if d == 1 else f"onnxc_dim_ceildiv(-{h}, {d})"
            axis["hi"] = _window_count(f"{axis['i']} - {h}", d, win.kernel[a])
            if include_pad:
                axis["count"] = _window_count(f"{axis['i']} + {axis['pe']} - {h}", d, win.kernel[a])
        names = [f"i{a}" for a in range(rank)]
        data = {
            "kind": self.kind, "axes": axes, "NC": cexpr.lit(cexpr.mul(x.dims[0], x.dims[1])),
            # element operations of the whole pool: the planes go to the threads above the threshold
            "work": cexpr.lit(cexpr.mul(x.dims[0], x.dims[1], cexpr.prod(out_dims), cexpr.prod(win.kernel))),
            "IN": cexpr.lit(cexpr.prod(in_dims)), "OUT": cexpr.lit(cexpr.prod(out_dims)),
            "ct": x.compute, "xt": x.ctype, "yt": y.ctype, "X": x.name, "Y": y.name,
            "load": x.dtype.load.format("xp[i]"), "flat": flat_index(names, in_dims),
            "include_pad": include_pad,
            "indices": k.outputs[1].name if len(k.outputs) > 1 else None,
            "arg": _column_major(names, in_dims) if node.attrs.get("storage_order", 0) else "i",
        }
        data.update(self.reduction(node, x))
        data["store"] = y.store(data["result"])
        return k.kernel("c/pool.c.j2", **data)

    def reduction(self, node: Node, x: TensorRef) -> dict[str, Any]:
        """init: accumulator start; step: statement folding v into acc; result: of acc (and count)."""
        raise NotImplementedError

    def whole_plane_reduction(self, node: Node, x: TensorRef, size: str) -> Optional[tuple[str, str, str]]:
        """The global pool's reduction (GlobalPool.reduction) of a window that covers each
        whole plane, or None to keep the windowed kernel."""
        return None


def _window_count(room: str, d: int, k: int) -> str:
    """Kernel offsets k' < k with h + k' * d below a bound, given room = bound - h (may be <= 0)."""
    reach = f"{room}" if d == 1 else f"onnxc_dim_floordiv({room} - 1, {d}) + 1"
    return f"onnxc_dim_min({k}, {reach})"


def _column_major(names: Sequence[str], sizes: Sequence[CExpr]) -> str:
    """Flat index with the first spatial axis fastest (MaxPool storage_order = 1)."""
    expr = names[-1]
    for name, size in zip(reversed(names[:-1]), reversed(sizes[:-1])):
        expr = f"({expr} * {cexpr.lit(size)} + {name})"
    return expr


def lp_power(p: float, v: str, compute: str) -> str:
    """|v| ** p in the compute type."""
    if p == 1:
        return f"{math_fn('fabs', compute)}({v})"
    if p == 2:
        return f"{v} * {v}"
    return f"{math_fn('pow', compute)}({math_fn('fabs', compute)}({v}), {float_literal(float(p), compute)})"


def lp_root(p: float, acc: str, compute: str) -> str:
    """acc ** (1 / p) in the compute type."""
    if p == 1:
        return acc
    if p == 2:
        return f"{math_fn('sqrt', compute)}({acc})"
    return f"{math_fn('pow', compute)}({acc}, {float_literal(1.0 / p, compute)})"


def global_pool_kernel(k: KernelContext, init: str, step: str, result: str) -> Kernel:
    """``c/global_pool.c.j2``: one reduction (GlobalPool.reduction's strings) over each (n, c)
    plane of the node's input into its output."""
    x, y = k.input(0), k.out
    lanes = 16 if step == "acc += v;" and x.dtype is dt.FLOAT else 0
    return k.kernel("c/global_pool.c.j2", NC=cexpr.lit(cexpr.mul(x.dims[0], x.dims[1])),
                    IN=cexpr.lit(cexpr.prod(x.dims[2:])), X=x.name, Y=y.name, xt=x.ctype, ct=x.compute,
                    load=x.dtype.load.format("xp[i]"), init=init, step=step, store=y.store(result), lanes=lanes)


class GlobalPool(OpDef):
    """Shared GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one value per (n, c) plane."""

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        if len(x.shape) < 3:
            raise ctx.fail(f"X must have a batch, a channel and spatial axes, got shape {list(x.shape)}")
        return [(x.dtype, (x.shape[0], x.shape[1]) + (1,) * (len(x.shape) - 2))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        return global_pool_kernel(k, *self.reduction(node, k.input(0), cexpr.lit(cexpr.prod(k.input(0).dims[2:]))))

    def reduction(self, node: Node, x: TensorRef, size: str) -> tuple[str, str, str]:
        """(accumulator start, statement folding v into acc, result of acc)."""
        raise NotImplementedError
