"""The ``c/pool_planes.c.j2`` kernel: float32 2-D MaxPool and AveragePool (without Indices)
with static sizes, over phase planes (``_phase_planes.py``) whose borders hold the
reduction's identity (-inf for max, 0 for a sum), so that no tap needs a bounds check; or,
for large maps, row by row: each input row copied between such borders, reduced over the
kernel's columns, then each output row over the kernel's rows (a padding row reads a row of
the identity).

Both reductions are separable: each channel is reduced over the kernel's columns first (one
vector loop per row phase), then over its rows (one vector loop), kw + kh steps per output
instead of kw * kh. An average divides each sum by the count of its window's counted
positions, which is a count of rows times a count of columns."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.memory import thread_part
from .. import dtypes as dt
from ._phase_planes import phase_planes, static_but_batch

if TYPE_CHECKING:
    from ._conv_pool import Window

POOL_PLANES_BYTES = 48 << 10   # a channel's scratch over phase planes above this: row by row instead

REDUCTIONS = {  # kind: (the identity the borders hold, the step folding value {v} into acc)
    "max": ("-INFINITY", "acc = {v} > acc ? {v} : acc;"),   # skips NaNs, as the generic loops do
    "avg": ("0.0f", "acc += {v};"),
}


def counts(size: int, out: int, k: int, s: int, d: int, begin: int, end: int, include_pad: bool) -> list[int]:
    """Positions each output's window counts along one axis: those inside the input, or with
    count_include_pad those before the end of the padded input (as the generic kernel counts)."""
    bound = size + end if include_pad else size
    low = -begin if include_pad else 0
    return [sum(1 for j in range(k) if low <= o * s - begin + j * d < bound) for o in range(out)]


def pool_planes(kind: str, k: KernelContext, win: Window, begins: Sequence[CExpr], ends: Sequence[CExpr],
                include_pad: bool) -> Kernel | None:
    """The kernel, or None where it does not apply (the generic loops run then)."""
    x, y = k.input(0), k.out
    if (kind not in REDUCTIONS or x.dtype is not dt.FLOAT or len(k.outputs) != 1 or win.rank != 2
            or not static_but_batch(k.target, x.dims, y.dims, begins, ends) or min(begins) < 0):
        return None
    pp = phase_planes(x.dims[2:], y.dims[2:], win.kernel, win.strides, win.dilations, begins)
    row_counts, col_counts = (counts(x.dims[2 + a], y.dims[2 + a], win.kernel[a], win.strides[a], win.dilations[a],
                                     begins[a], ends[a], include_pad) for a in range(2))
    if min(row_counts) < 1 or min(col_counts) < 1:
        return None   # a window of padding alone
    (kh, kw), (s0, s1), (d0, d1) = win.kernel, win.strides, win.dilations
    h, w = x.dims[2:]
    oh, ow = y.dims[2:]
    plane = pp.QH * pp.QW
    across = s0 * plane       # each row phase reduced over the kernel's columns
    planes_floats = pp.floats + across + pp.OH * pp.QW    # one thread's planes, `across` and row buffer
    # Row by row where a channel's planes would not stay in the first-level cache (a network's
    # first pool, 3x3 stride 2 of 64 x 112 x 112: 91 KiB of planes a channel, 0.257 -> 0.198 ms
    # at 1 thread; 2x2 stride 2 of 160 x 160: 0.232 -> 0.161). Smaller maps keep the planes,
    # whose vector loops run over a whole channel rather than short rows (55 x 55 3x3 stride 2:
    # 0.049 ms over planes, 0.083 row by row; Sapphire Rapids).
    by_rows = planes_floats * 4 > POOL_PLANES_BYTES
    # a row between its borders: begins[1] of them on the left, as many on the right as the
    # last window reaches past the input (ceil_mode's and the end padding's)
    line = max(begins[1] + w, (ow - 1) * s1 + (kw - 1) * d1 + 1)
    # row by row, one thread's scratch: the row, a row of the identity (padding rows read it)
    # and the channel's rows reduced over the kernel's columns
    stride = thread_part(line + ow + h * ow if by_rows else planes_floats, 4)
    border, step = REDUCTIONS[kind]
    n, c = x.dims[:2]
    data = {
        **pp.template_data(), "pp": pp.template_data(), "kind": kind, "NC": cexpr.mul(n, c), "STRIDE": stride,
        "threads": k.target.threads, "PLANE": plane, "ACROSS": across, "border": border, "step": step,
        "col_taps": list(pp.col_taps),
        "row_taps": [a * d0 % s0 * plane + a * d0 // s0 * pp.QW for a in range(kh)],
        "by_rows": by_rows, "LINE": line, "line_taps": [b * d1 for b in range(kw)],
        "rows_of_taps": [a * d0 - begins[0] for a in range(kh)],
        "row_counts": row_counts, "col_counts": col_counts, "x_ptr": x.name, "y_ptr": y.name,
        "work": cexpr.mul(n, c, h * (w + ow * kw) + oh * ow * kh if by_rows else across * kw + pp.OH * pp.QW * kh),
    }
    kernel = k.kernel("c/pool_planes.c.j2", **data)
    kernel.scratch["plane"] = cexpr.mul(k.target.threads, stride, 4)
    return kernel
