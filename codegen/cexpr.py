"""C integer expressions of dims (sizes, strides, element counts), built as data.

The helpers fold constants and return an int where they can; otherwise an :class:`Expr`,
which is the C text (a ``uses.CText``: the identifiers it names are recorded where it is
written) and also the operation and operands it was built from. So the compiler asks a size
which dim variables it names (:func:`symbols`) and what it is worth for given dims
(:func:`evaluate`) from that data, never by reading the text back. A dim variable is a
``uses.DimVar``; any other text an expression is built from is opaque: it has no symbols and
no value (a size that names it is known only at run time).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Union

from .uses import CText, DimVar, plain, refs

CExpr = Union[int, str]   # a str may be a uses.CText: the identifiers it names travel with it


def lit(x: CExpr) -> str:
    if isinstance(x, int):
        return f"INT64_C({x})" if abs(x) > 2**31 - 1 else str(x)
    return x


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncates toward zero)."""
    if b == 0:
        raise ValueError("division by zero in a dim expression")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# The run-time dim helpers (c/helpers) an expression may call, by their value in Python.
DIM_FUNCTIONS: dict[str, Callable[[int, int], int]] = {
    "onnxc_dim_max": max, "onnxc_dim_min": min,
    "onnxc_dim_floordiv": lambda a, b: a // b if b else -1,
    "onnxc_dim_ceildiv": lambda a, b: -(-a // b) if b else -1,
    "onnxc_dim_mod": lambda a, b: a % b if b else -1,
}


class Expr(CText):
    """A symbolic C integer expression: its text, and ``op`` applied to ``args`` (ints,
    ``DimVar``s, other ``Expr``s, or opaque text)."""
    op: str        # "mul", "add", "div", "round_up" or a DIM_FUNCTIONS name
    args: tuple

    def __new__(cls, op: str, args: tuple, text: str) -> Expr:
        self = str.__new__(cls, text)
        self.refs = tuple(r for a in args for r in refs(a))
        self.op, self.args = op, args
        return self

    @property
    def symbols(self) -> Optional[frozenset[str]]:
        return symbols(self)

    def evaluate(self, values: dict[str, int]) -> int:
        return evaluate(self, values)


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
    terms = ([const] if const != 1 else []) + syms
    if len(terms) == 1:
        return terms[0]
    return Expr("mul", tuple(terms), "(" + " * ".join(plain(lit(t)) for t in terms) + ")")


def add(*xs: CExpr) -> CExpr:
    const, syms = 0, []
    for x in xs:
        if isinstance(x, int):
            const += x
        else:
            syms.append(x)
    if not syms:
        return const
    terms = syms + ([const] if const != 0 else [])
    if len(terms) == 1:
        return terms[0]
    return Expr("add", tuple(terms), "(" + " + ".join(plain(lit(t)) for t in terms) + ")")


def div(a: CExpr, b: CExpr) -> CExpr:
    """``(a / b)`` in C (truncating)."""
    if isinstance(a, int) and isinstance(b, int):
        return _c_div(a, b)
    return Expr("div", (a, b), f"({_quotient(a, b)})")


def _quotient(a: CExpr, b: CExpr) -> str:
    return f"{plain(lit(a))} / {plain(lit(b))}"


def round_up(x: CExpr, m: int) -> CExpr:
    """``x`` rounded up to a multiple of ``m`` (> 0)."""
    if isinstance(x, int):
        return -(-x // m) * m
    return Expr("round_up", (x, m), f"(({plain(x)} + {m - 1}) / {m} * {m})")


def call(fn: str, a: CExpr, b: CExpr) -> Expr:
    """A call of one of the run-time dim helpers (``DIM_FUNCTIONS``), as written (not folded)."""
    if fn not in DIM_FUNCTIONS:
        raise ValueError(f"internal: {fn!r} is not a dim function")
    return Expr(fn, (a, b), f"{fn}({_argument(a)}, {_argument(b)})")


def _argument(x: CExpr) -> str:
    """``x`` as a call's argument: a quotient without its parentheses."""
    return _quotient(*x.args) if isinstance(x, Expr) and x.op == "div" else plain(lit(x))


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


def rename(x: CExpr, names: dict[str, DimVar]) -> Optional[CExpr]:
    """``x`` built again with the dim variables ``names`` maps replaced (the rest kept); None
    where it holds opaque text that names a dim variable."""
    if isinstance(x, int):
        return x
    if isinstance(x, DimVar):
        return names.get(plain(x), x)
    if not isinstance(x, Expr):
        return None if any(kind == "dim" for _, kind, _ in refs(x)) else x
    args = [rename(a, names) if not (x.op == "round_up" and k == 1) else a for k, a in enumerate(x.args)]
    if any(a is None for a in args):
        return None
    if x.op == "mul":
        return mul(*args)
    if x.op == "add":
        return add(*args)
    if x.op == "div":
        return div(*args)
    if x.op == "round_up":
        return round_up(args[0], args[1])
    return call(x.op, *args)


def symbols(x: CExpr) -> Optional[frozenset[str]]:
    """The dim variables ``x`` names, or None where it holds opaque text."""
    if isinstance(x, int):
        return frozenset()
    if isinstance(x, DimVar):
        return frozenset({plain(x)})
    if not isinstance(x, Expr):
        return None
    found: set[str] = set()
    for a in x.args:
        part = symbols(a)
        if part is None:
            return None
        found |= part
    return frozenset(found)


def evaluate(x: CExpr, values: dict[str, int]) -> int:
    """The value of ``x`` for the dim variables ``values``, as C computes it. Raises
    ValueError where ``x`` holds opaque text, names a variable ``values`` lacks, or divides by 0."""
    if isinstance(x, int):
        return x
    if isinstance(x, DimVar):
        if plain(x) not in values:
            raise ValueError(f"no value for dim {plain(x)}")
        return values[plain(x)]
    if not isinstance(x, Expr):
        raise ValueError(f"not a dim expression the compiler built: {plain(x)}")
    args = [evaluate(a, values) for a in x.args]
    if x.op == "mul":
        out = 1
        for a in args:
            out *= a
        return out
    if x.op == "add":
        return sum(args)
    if x.op == "div":
        return _c_div(*args)
    if x.op == "round_up":
        return _c_div(args[0] + args[1] - 1, args[1]) * args[1]
    return DIM_FUNCTIONS[x.op](*args)


# float32 functions that have a vectorizable version in c/helpers/fastmath.c.j2 (error bounds there).
FAST_FLOAT = {"exp": "onnxc_expf", "erf": "onnxc_erff", "tanh": "onnxc_tanhf"}


def math_fn(name: str, compute: str) -> str:
    """The C function for a compute type: ``expf`` for float (or onnxc's vectorizable
    version, FAST_FLOAT), ``exp`` for double."""
    if compute == "float":
        return FAST_FLOAT.get(name, name + "f")
    return name
