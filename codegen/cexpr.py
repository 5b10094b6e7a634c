"""Small helpers that build C integer expressions from dims, folding constants."""
from __future__ import annotations

from typing import Iterable, Union

CExpr = Union[int, str]


def lit(x: CExpr) -> str:
    if isinstance(x, int):
        return f"INT64_C({x})" if abs(x) > 2**31 - 1 else str(x)
    return x


def mul(*xs: CExpr) -> CExpr:
    const, syms = 1, []
    for x in xs:
        if isinstance(x, int):
            const *= x
        else:
            syms.append(x)
    if const == 0:
        return 0
    if not syms:
        return const
    terms = ([lit(const)] if const != 1 else []) + syms
    return terms[0] if len(terms) == 1 else "(" + " * ".join(terms) + ")"


def add(*xs: CExpr) -> CExpr:
    const, syms = 0, []
    for x in xs:
        if isinstance(x, int):
            const += x
        else:
            syms.append(x)
    if not syms:
        return const
    terms = syms + ([lit(const)] if const != 0 else [])
    return terms[0] if len(terms) == 1 else "(" + " + ".join(terms) + ")"


def prod(xs: Iterable[CExpr]) -> CExpr:
    return mul(*xs)


def strides(dims: list[CExpr]) -> list[CExpr]:
    """Row-major element strides of a contiguous tensor."""
    out: list[CExpr] = []
    acc: CExpr = 1
    for d in reversed(dims):
        out.append(acc)
        acc = mul(acc, d)
    return out[::-1]


# float32 functions that have a vectorizable version in c/helpers/fastmath.c.j2 (error bounds there).
FAST_FLOAT = {"exp": "onnxc_expf", "erf": "onnxc_erff", "tanh": "onnxc_tanhf"}


def math_fn(name: str, compute: str) -> str:
    """The C function for a compute type: ``expf`` for float (or onnxc's vectorizable
    version, FAST_FLOAT), ``exp`` for double."""
    if compute == "float":
        return FAST_FLOAT.get(name, name + "f")
    return name
