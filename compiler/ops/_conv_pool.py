"""Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops:
attribute checks, pads from ``auto_pad``, output sizes (symbolic-aware) and the
per-axis data the ``c/conv.c.j2`` / ``c/pool.c.j2`` families loop over.

Pads may be negative (SAME with a kernel smaller than the stride crops), which
the kernels handle like any other window start: every input position is
bounds-checked per axis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ..dims import Dim, DimTable
from ..errors import ShapeError
from ..ir import Node

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


def flat_index(names: Sequence[str], sizes: Sequence[CExpr]) -> str:
    """Row-major flat index of positions ``names`` in a box of ``sizes``: ((a * S1 + b) * S2 + c)."""
    expr = names[0]
    for name, size in zip(names[1:], sizes[1:]):
        expr = f"({expr} * {cexpr.lit(size)} + {name})"
    return expr


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
