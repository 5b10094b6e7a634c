"""Winograd minimal filtering F(m x m, 3 x 3) for float32 3x3 stride-1 convolutions.

An output tile of m x m values is computed from an (m + 2) x (m + 2) tile of the input d as

    Y = A^T [ (G g G^T) . (B^T d B) ] A

(``.`` element by element), so each of its (m + 2)^2 transformed points is one product per
pair of input and output channels: over all tiles, (m + 2)^2 GEMMs of (out channels x in
channels) by (in channels x tiles), with (m + 2)^2 / (9 m^2) of the direct convolution's
multiply-adds (F(4x4): 36 for 16 outputs instead of 144, a quarter). The filters'
transform G g G^T is done here, at compile time; the block kernels (``c/helpers/winograd.j2``,
called by ``c/conv_winograd.c.j2``) transform the input and output with the expressions
:func:`transform_code` writes out.

The matrices are built by the Toom-Cook construction (as in Lavin and Gray, "Fast Algorithms
for Convolutional Neural Networks", 2016) from interpolation points 0, 1, -1 (and infinity)
for F(2x2) and 0, 1, -1, 1/2, -2 for F(4x4): Barabasz et al. ("Error Analysis and Improving
the Accuracy of Winograd Convolution for Deep Neural Networks", 2020) found those last ones
to round about 3 times less than Lavin and Gray's 0, +-1, +-2 (simulated in float32 over 128
channels: 2.0e-6 of the output's magnitude against 6.2e-6).
"""
from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction as F

import numpy as np

POINTS = {
    2: (F(0), F(1), F(-1)),
    4: (F(0), F(1), F(-1), F(1, 2), F(-2)),
}

TILES = tuple(POINTS)   # the output tile sizes m there are matrices for


@dataclasses.dataclass(frozen=True)
class Winograd:
    m: int                    # output tile: m x m
    BT: list[list[F]]         # (m + 2) x (m + 2)
    G: list[list[F]]          # (m + 2) x 3
    AT: list[list[F]]         # m x (m + 2)

    @property
    def alpha(self) -> int:   # input tile: alpha x alpha, alpha^2 transformed points
        return self.m + 2


def _poly(roots: list[F]) -> list[F]:
    """Coefficients (of x^0, x^1, ...) of the product of (x - root)."""
    c = [F(1)]
    for r in roots:
        c = [(c[k - 1] if k > 0 else 0) - r * (c[k] if k < len(c) else 0) for k in range(len(c) + 1)]
    return c


def winograd(m: int, r: int = 3) -> Winograd:
    """F(m, r) from POINTS[m]: the correlation is the transpose of the polynomial product
    evaluated at the points (and at infinity: the leading coefficients) and interpolated, so
    A^T evaluates, G evaluates the filter with the interpolation's denominators folded in,
    and B^T holds the interpolation's numerator polynomials."""
    pts = POINTS[m]
    n = m + r - 1
    at = [[p ** i for p in pts] + [F(1 if i == m - 1 else 0)] for i in range(m)]
    g = []
    for j, p in enumerate(pts):
        f = F(1)
        for k, q in enumerate(pts):
            if k != j:
                f *= p - q
        g.append([p ** k / f for k in range(r)])
    g.append([F(0)] * (r - 1) + [F(1)])
    bt = [_poly([q for k, q in enumerate(pts) if k != j]) + [F(0)] for j in range(n - 1)]
    bt.append(_poly(list(pts)))
    return Winograd(m, bt, g, at)


def transform_filters(w: np.ndarray, wg: Winograd, mr: int) -> np.ndarray:
    """W (K x C x 3 x 3) -> U, the alpha^2 matrices (G w G^T)[i][j] (K x C each, i * alpha + j
    in order) packed as the GEMM's A (``_gemm.pack_rows``: panels of ``mr`` rows of K, rows past
    K zero), computed in float64 and rounded once. A few panels at a time, each read once and
    its products written straight to their packed places: the whole in float64 or unpacked
    would be several times the weights (VGG's 80 MB of 3x3 filters would pass through 640 MB)."""
    # (G w G^T)[i][j] = sum over a, b of G[i][a] G[j][b] w[a][b]: the alpha^2 x 9 products
    # G[i][a] G[j][b] (exact fractions, then float64) times the filters as 9 x (panel, C, row)
    kron = np.array([[float(gi[a] * gj[b]) for a in range(3) for b in range(3)] for gi in wg.G for gj in wg.G])
    k, c = w.shape[:2]
    panels = -(-k // mr)
    out = np.empty((len(kron), panels, c, mr), np.float32)
    step = max(1, TRANSFORM_CHUNK // (mr * c * 9))   # (panels per product)
    filters = w.reshape(k, c, 9)
    for p0 in range(0, panels, step):
        p1 = min(panels, p0 + step)
        rows = filters[p0 * mr:p1 * mr]
        if len(rows) < (p1 - p0) * mr:   # (the last panel's rows past K: zero filters, zero products)
            rows = np.concatenate([rows, np.zeros(((p1 - p0) * mr - len(rows), c, 9), w.dtype)])
        block = rows.reshape(p1 - p0, mr, c, 9).transpose(0, 2, 1, 3).reshape(-1, 9).astype(np.float64)
        products = out[:, p0:p1].reshape(len(kron), -1)   # (a view: the panels' places)
        for r0 in range(0, len(block), TRANSFORM_FILTERS):
            products[:, r0:r0 + TRANSFORM_FILTERS] = kron @ block[r0:r0 + TRANSFORM_FILTERS].T
    return out.reshape(-1)


# Filter values a block of transform_filters covers (its float64 copy and products stay in cache).
TRANSFORM_CHUNK = 1 << 14
# Filters a product of it covers: few enough that the BLAS computes it on the calling thread
# (OpenBLAS does below 2^18 multiply-adds). A compile's other cores are busy with the C compiler
# and the weights writer, and the BLAS's threads spinning beside them doubled code generation's
# time (VGG-19 at 2 threads: 1.15-1.25 s, 0.53-0.54 s with the BLAS on one thread).
TRANSFORM_FILTERS = 768


def _literal(v: F) -> str:
    f = float(v)
    return f"{f:.1f}f" if f == int(f) else f"{np.float32(f)!r}".replace("np.float32(", "").rstrip(")") + "f"


def _combination(coeffs: list[F], terms: list[str]) -> str:
    """sum_k coeffs[k] * terms[k] as C, with zero terms dropped and unit factors left out."""
    out = []
    for c, t in zip(coeffs, terms):
        if c == 0:
            continue
        mag = abs(c)
        piece = t if mag == 1 else f"{_literal(mag)} * {t}"
        out.append(("- " if c < 0 else "+ ") + piece)
    if not out:
        return "0.0f"
    text = " ".join(out)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def transform_code(wg: Winograd) -> dict[str, list[str]]:
    """The 1-D transforms as C expressions over the scalars ``x0``, ``x1``, ...: ``input``
    gives (B^T x)[i] for each i (alpha of them), ``output`` (A^T x)[i] (m of them). A tile is
    transformed along its rows, then along its columns (B^T d B, A^T M A)."""
    xs = [f"x{k}" for k in range(wg.alpha)]
    return {"input": [_combination(row, xs) for row in wg.BT],
            "output": [_combination(row, xs) for row in wg.AT]}


@functools.cache
def helper_data() -> dict[int, dict[str, list[str]]]:
    """What the block kernels (c/helpers/winograd.j2) are rendered from: per tile size m,
    its 1-D transforms."""
    return {m: transform_code(winograd(m)) for m in TILES}
