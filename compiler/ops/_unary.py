"""Shared helpers of the unary elementwise ops (Exp, Sigmoid, Clip, PRelu ...):
<math.h> names, float literals of the right compute type and small C expression
builders. The kernels themselves are ``c/elementwise.c.j2`` maps."""
from __future__ import annotations

from typing import ClassVar, Optional

from ...codegen.cexpr import math_fn
from ...codegen.kernel import TensorRef
from .. import dtypes as dt
from ..ir import Node
from ._elementwise import Unary


def unsigned_of(t: TensorRef) -> str:
    """The unsigned C type of the same width as an integer tensor's type."""
    return t.ctype if t.dtype.kind == "uint" else "u" + t.ctype


def wrapping_neg(x: str, t: TensorRef) -> str:
    """-x; signed integers wrap (INT_MIN stays INT_MIN) like numpy instead of overflowing."""
    if t.dtype.is_float:
        return f"-{x}"
    return f"({t.ctype})(0u - ({unsigned_of(t)}){x})"


def clamp(x: str, lo: Optional[str], hi: Optional[str], ordered: bool = False) -> str:
    """min(max(x, lo), hi) in C (so lo > hi gives hi); a NaN x stays NaN.

    ``ordered``: lo <= hi is known, which allows a shorter expression.
    """
    if lo is not None and hi is not None and ordered:
        return f"({x} < {lo} ? {lo} : ({x} > {hi} ? {hi} : {x}))"
    if lo is not None:
        x = f"({x} < {lo} ? {lo} : {x})"
    if hi is not None:
        x = f"({x} > {hi} ? {hi} : {x})"
    return x


def softplus(x: str, compute: str) -> str:
    """log(1 + exp(x)) without overflow for large x."""
    log1p, exp = math_fn("log1p", compute), math_fn("exp", compute)
    return f"({x} > 0 ? {x} + {log1p}({exp}(-{x})) : {log1p}({exp}({x})))"


def sigmoid(x: str, compute: str) -> str:
    """1 / (1 + exp(-x))."""
    return f"(1 / (1 + {math_fn('exp', compute)}(-{x})))"


class FloatUnary(Unary):
    """y = f(x) on float tensors."""
    types: ClassVar = dt.FLOATS


class MathUnary(FloatUnary):
    """y = func(x) through one <math.h> function."""
    func: ClassVar[str] = ""

    def scalar(self, x: str, node: Node, t: TensorRef) -> str:
        return f"{math_fn(self.func, t.compute)}({x})"
