"""Phase planes: the layout the depthwise convolution and pooling kernels slide their 2-D
windows over (``c/phase_planes.j2`` fills them).

A channel, with its padding rows and columns, is split into S0 x S1 phase planes: plane
(a, b) holds padded position (S0 * i + a, S1 * j + b) at row i, column j, in QH x QW values
(+ ``tail``, so that the last row's taps stay inside). Output (oh, ow) then reads tap
(kh, kw) from plane ((kh * D0) % S0, (kw * D1) % S1), row oh + (kh * D0) // S0, column
ow + (kw * D1) // S1: every tap is a fixed offset from the output's position
q = oh * QW + ow, whatever the strides and dilations, so one vector loop over all OH * QW
positions computes a channel without stopping at row ends. The QW - OW positions past each
row end are computed and dropped."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...codegen.cexpr import CExpr

if TYPE_CHECKING:
    from ...codegen.kernel import Target


@dataclasses.dataclass(frozen=True)
class PhasePlanes:
    H: int       # input rows and columns
    W: int
    OH: int      # output rows and columns
    OW: int
    PT: int      # padding rows above, columns on the left
    PL: int
    S0: int      # strides
    S1: int
    QH: int      # rows and columns of each phase plane
    QW: int
    PQ: int      # floats of each phase plane (QH * QW + tail)
    row_taps: tuple[int, ...]   # offset of kernel row kh (plane and rows)
    col_taps: tuple[int, ...]   # offset of kernel column kw (plane and columns)
    # per column phase b: the first input column landing on it, and its column in the plane
    phases: tuple[tuple[int, int, int], ...]

    @property
    def taps(self) -> list[int]:
        """Offset of every tap (kh, kw), kh outer."""
        return [r + c for r in self.row_taps for c in self.col_taps]

    @property
    def floats(self) -> int:
        """Floats of all S0 x S1 planes of one channel."""
        return self.S0 * self.S1 * self.PQ

    def template_data(self) -> dict[str, int | list]:
        return {"H": self.H, "W": self.W, "OH": self.OH, "OW": self.OW, "QH": self.QH, "QW": self.QW, "PQ": self.PQ,
                "PT": self.PT, "PL": self.PL, "S0": self.S0, "S1": self.S1, "phases": list(self.phases)}


def phase_planes(in_hw: Sequence[int], out_hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int], begins: Sequence[int]) -> PhasePlanes:
    """The planes of a 2-D window with static sizes and pads of at least 0."""
    (h, w), (oh, ow), (kh, kw) = in_hw, out_hw, kernel
    (s0, s1), (d0, d1), (pt, pl) = strides, dilations, begins
    # padded rows / columns read: up to (O - 1) * S + (K - 1) * D, and the input's
    rows = max((oh - 1) * s0 + (kh - 1) * d0 + 1, pt + h)
    cols = max((ow - 1) * s1 + (kw - 1) * d1 + 1, pl + w)
    qh, qw = -(-rows // s0), -(-cols // s1)
    tail = (kw - 1) * d1 // s1     # the last row's taps reach this far past a plane
    pq = qh * qw + tail
    return PhasePlanes(
        H=h, W=w, OH=oh, OW=ow, PT=pt, PL=pl, S0=s0, S1=s1, QH=qh, QW=qw, PQ=pq,
        row_taps=tuple(a * d0 % s0 * s1 * pq + a * d0 // s0 * qw for a in range(kh)),
        col_taps=tuple(b * d1 % s1 * pq + b * d1 // s1 for b in range(kw)),
        phases=tuple((b, first, (first + pl) // s1)
                     for b, first in ((b, (b - pl) % s1) for b in range(s1)) if first < w))


def static_but_batch(target: Target, x_dims: Sequence[CExpr], y_dims: Sequence[CExpr],
                     *more: Sequence[CExpr]) -> bool:
    """Whether every size is known but the batch (the first dim of X and of Y): kernels that
    plan their loops for the sizes of one image take a batch that the model leaves free (the
    exporters' dynamic batch axis) as a loop count. Only builds that pack weights at compile
    time (native ones: ``target.prepack``) take a free batch; the CUDA templates compute with
    these sizes as numbers."""
    if not isinstance(x_dims[0], int) and not target.prepack:
        return False
    sizes = [*x_dims[1:], *y_dims[1:], *(d for dims in more for d in dims)]
    return all(isinstance(d, int) for d in sizes)
