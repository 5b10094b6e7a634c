"""Shared machinery of normalizations over contiguous units (the ``c/normalization.c.j2`` family).

LayerNormalization, RMSNormalization, GroupNormalization and
InstanceNormalization all normalize units of ``size`` contiguous elements:
the input is [N, G, P, Q] where each (n, g) is one unit, and the affine
parameters (scale, bias) are indexed by an expression in g, p and q.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.literals import float_literal
from ...codegen.names import c_string
from .. import dtypes as dt
from ..dims import Shape
from ._reduce import check_type
from .registry import InferContext


def strip_ones(shape: Sequence) -> tuple:
    """``shape`` without its leading 1s."""
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def check_suffix_param(ctx: InferContext, param: Shape, block: Shape, what: str) -> None:
    """A parameter that broadcasts onto ``block`` by matching a suffix of it (or is a scalar).
    A dim that is symbolic on either side is checked when the kernel runs (suffix_checks)."""
    p, b = strip_ones(param), strip_ones(block)
    suffix = tuple(b[len(b) - len(p):]) if p else ()
    if len(p) > len(b) or any(isinstance(d, int) and isinstance(e, int) and d != e for d, e in zip(p, suffix)):
        raise ctx.fail(f"{what} shape {list(param)} does not broadcast to the normalized shape {list(block)}")


def suffix_checks(k: KernelContext, block: Sequence[cexpr.CExpr], params: Sequence[Optional[TensorRef]]) -> list[dict]:
    """Run-time checks that each parameter's dims equal the normalized dims they stand over,
    where either is symbolic (check_suffix_param compared the known ones)."""
    out = []
    for t in params:
        if t is None:
            continue
        dims = list(t.dims)
        while dims and dims[0] == 1:
            dims.pop(0)
        for d, e in zip(dims, list(block)[len(block) - len(dims):]):
            if d != e and not (isinstance(d, int) and isinstance(e, int)):
                out.append({"got": cexpr.lit(d), "want": cexpr.lit(e),
                            "msg": c_string(f"{k.node.op_type}: {t.name} does not match the normalized axes")})
    return out


def check_float_input(ctx: InferContext, i: int, what: str) -> None:
    check_type(ctx, ctx.inp(i).dtype, dt.FLOATS, what)


def check_vector(ctx: InferContext, i: int, length, what: str) -> None:
    """Input ``i`` is 1-D with ``length`` elements (checked by the kernel when symbolic)."""
    shape = ctx.inp(i).shape
    if len(shape) != 1 or (isinstance(shape[0], int) and isinstance(length, int) and shape[0] != length):
        raise ctx.fail(f"{what} must have shape [{length}], not {list(shape)}")


def length_checks(k: KernelContext, pairs: Sequence[tuple[Optional[TensorRef], cexpr.CExpr]]) -> list[dict]:
    """Run-time checks that 1-D parameters have the expected symbolic length."""
    out = []
    for t, length in pairs:
        if t is not None and t.dims[0] != length:
            out.append({"got": cexpr.lit(t.dims[0]), "want": cexpr.lit(length),
                        "msg": c_string(f"{k.node.op_type}: {t.name} has the wrong length")})
    return out


def unit_kernel(k: KernelContext, *, x: TensorRef, y: TensorRef, N, G, P, Q, epsilon: float, center: bool,
                params: Sequence[tuple[Optional[TensorRef], str]] = (),
                stats: Sequence[tuple[TensorRef, str]] = (), checks: Sequence[dict] = ()) -> Kernel:
    """The c/normalization.c.j2 kernel.

    ``params``: (scale or bias tensor, index expression in g, p, q), the first
    multiplies, the second adds; ``stats``: (output, "mean" | "inv_std") per unit.
    ``center``: subtract the mean (False for RMS normalization); ``checks``: from length_checks.
    """
    c = "double" if "double" in (x.compute, y.compute) else "float"
    size = cexpr.mul(P, Q)
    affine = [{"role": role, "load": t.load(index)}
              for (t, index), role in zip(params, ("scale", "bias")) if t is not None]
    stats_data = [{"name": t.name, "value": t.store("mu" if what == "mean" else "inv_std")} for t, what in stats]
    return k.kernel("c/normalization.c.j2", X=x.name, Y=y.name, compute=c, load=x.load("{}"), store=y.store("{}"),
                    N=cexpr.lit(N), G=cexpr.lit(G), P=cexpr.lit(P), Q=cexpr.lit(Q), size=cexpr.lit(size),
                    center=center, epsilon=float_literal(epsilon, c), sqrt=math_fn("sqrt", c), affine=affine,
                    checks=list(checks), stats=stats_data)


def suffix_layout(k: KernelContext, block: Sequence[cexpr.CExpr], block_shape: Shape,
                  params: Sequence[Optional[TensorRef]]) -> tuple:
    """Lay a unit (the normalized axes ``block``) out as [P, Q] so that every parameter
    (suffix-broadcast onto the block) is indexed by ``0``, ``q`` or ``p * Q + q``.

    Returns (P, Q, index expression per parameter)."""
    full = len(strip_ones(block_shape))
    lens = [len(strip_ones(t.shape)) if t is not None else 0 for t in params]
    partial = set(lens) - {0, full}
    if len(partial) > 1:
        raise k.unsupported("scale and bias broadcast differently over the normalized axes")
    split = len(block) - (partial.pop() if partial else full)
    P, Q = cexpr.prod(block[:split]), cexpr.prod(block[split:])
    indices = []
    for t, n in zip(params, lens):
        if t is None or n == 0:
            indices.append("0")
        elif n == full and P != 1:
            indices.append(f"p * {cexpr.lit(Q)} + q")
        else:
            indices.append("q")
    return P, Q, indices
