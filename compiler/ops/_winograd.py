"""Winograd minimal filtering F(m x m, 3 x 3) for float32 3x3 stride-1 convolutions.

An output tile of m x m values is computed from an (m + 2) x (m + 2) tile of the input d as

    Y = A^T [ (G g G^T) . (B^T d B) ] A

(``.`` element by element), so each of its (m + 2)^2 transformed points is one product per
pair of input and output channels: over all tiles, (m + 2)^2 GEMMs of (out channels x in
channels) by (in channels x tiles), with m^2 / (m + 2)^2 * 9 as many multiply-adds as the
direct convolution's (F(4x4): 36 for 16 outputs instead of 144, a quarter). The filters'
transform G g G^T is done here, at compile time; the kernel (``c/conv_winograd.c.j2``)
transforms the input and output with the expressions :func:`transform_code` writes out.

The matrices are Lavin and Gray's ("Fast Algorithms for Convolutional Neural Networks", 2016)
with interpolation points 0, +-1, +-2 (and infinity) for F(4x4) and 0, +-1 for F(2x2), whose
float32 rounding error stays near that of the direct sum at these sizes (the test compares
with onnxruntime at the model tests' tolerance).
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import numpy as np

_MATRICES = {
    2: {
        "BT": [[1, 0, -1, 0],
               [0, 1, 1, 0],
               [0, -1, 1, 0],
               [0, 1, 0, -1]],
        "G": [[1, 0, 0],
              [F(1, 2), F(1, 2), F(1, 2)],
              [F(1, 2), F(-1, 2), F(1, 2)],
              [0, 0, 1]],
        "AT": [[1, 1, 1, 0],
               [0, 1, -1, -1]],
    },
    4: {
        "BT": [[4, 0, -5, 0, 1, 0],
               [0, -4, -4, 1, 1, 0],
               [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 4, 0, -5, 0, 1]],
        "G": [[F(1, 4), 0, 0],
              [F(-1, 6), F(-1, 6), F(-1, 6)],
              [F(-1, 6), F(1, 6), F(-1, 6)],
              [F(1, 24), F(1, 12), F(1, 6)],
              [F(1, 24), F(-1, 12), F(1, 6)],
              [0, 0, 1]],
        "AT": [[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -2, 0],
               [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]],
    },
}

TILES = tuple(_MATRICES)   # the output tile sizes m there are matrices for


@dataclasses.dataclass(frozen=True)
class Winograd:
    m: int                    # output tile: m x m
    BT: list[list[F]]         # (m + 2) x (m + 2)
    G: list[list[F]]          # (m + 2) x 3
    AT: list[list[F]]         # m x (m + 2)

    @property
    def alpha(self) -> int:   # input tile: alpha x alpha, alpha^2 transformed points
        return self.m + 2


def winograd(m: int) -> Winograd:
    mats = _MATRICES[m]
    return Winograd(m, *([[F(v) for v in row] for row in mats[k]] for k in ("BT", "G", "AT")))


def transform_filters(w: np.ndarray, wg: Winograd) -> np.ndarray:
    """W (K x C x 3 x 3) -> U (alpha^2 x K x C): U[i * alpha + j] = (G w G^T)[i][j], in float64
    and rounded once."""
    g = np.array([[float(v) for v in row] for row in wg.G])
    u = np.einsum("ia,kcab,jb->ijkc", g, w.astype(np.float64), g)
    return u.reshape(wg.alpha * wg.alpha, *w.shape[:2]).astype(np.float32)


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
