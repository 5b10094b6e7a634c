"""Symbolic dimensions.

A dim is an ``int`` or a symbol name (``str``). Every symbol has one definition
in the graph's :class:`DimTable`:

* ``input``: bound from a graph input's shape when the model runs;
* ``expr``: arithmetic over other dims (``add``, ``mul``, ``floordiv`` ...);
* ``data``: computed by a node from tensor *values* at run time (Reshape with a
  runtime shape, NonZero ...).

Expressions fold when every operand is an int, and identical expressions share
one symbol, so equal dims compare equal as Python values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .errors import ShapeError

Dim = Union[int, str]
Shape = tuple  # tuple[Dim, ...]

# op -> (python fold, is_checked); checked ops can fail at run time.
_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "ceildiv": lambda a, b: -(-a // b),
    "mod": lambda a, b: a % b,
    "max": max,
    "min": min,
}
CHECKED_OPS = ("bcast", "same")


@dataclass(frozen=True)
class DimDef:
    kind: str                 # "input" | "expr" | "data"
    op: str = ""              # expr operator
    args: tuple = ()          # expr operands (dims)
    origin: str = ""          # human hint: input name/axis or node name
    named: bool = True        # an input dim: False when the model leaves it unnamed (onnxc made the name up)


class DimTable:
    def __init__(self) -> None:
        self.defs: dict[str, DimDef] = {}
        self._memo: dict[tuple, str] = {}
        self._count = 0
        # Checked symbols (bcast/same) made since the caller last cleared this list: the
        # node whose inference made them must verify them at run time before it runs.
        self.checks: list[str] = []

    def __contains__(self, name: str) -> bool:
        return name in self.defs

    def _fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{hint}{self._count}"
            if name not in self.defs:
                return name

    def declare_input(self, name: str, origin: str, named: bool = True) -> str:
        if name not in self.defs:
            self.defs[name] = DimDef("input", origin=origin, named=named)
        return name

    def fresh_input(self, origin: str, hint: str = "v") -> str:
        """A new symbol bound from an input shape (e.g. a loop state dim that may change)."""
        name = self._fresh(hint)
        self.defs[name] = DimDef("input", origin=origin)
        return name

    def data(self, origin: str, hint: str = "r") -> str:
        """A new symbol whose value a node computes at run time."""
        name = self._fresh(hint)
        self.defs[name] = DimDef("data", origin=origin)
        return name

    def expr(self, op: str, a: Dim, b: Dim) -> Dim:
        if isinstance(a, int) and isinstance(b, int):
            if op in _FOLD:
                if op in ("floordiv", "ceildiv", "mod") and b == 0:
                    raise ShapeError("division by zero in a shape computation")
                return _FOLD[op](a, b)
            if op == "bcast":
                if a != b and a != 1 and b != 1:
                    raise ShapeError(f"dims {a} and {b} cannot broadcast")
                return b if a == 1 else a
            if op == "same":
                if a != b:
                    raise ShapeError(f"dims {a} and {b} differ")
                return a
        if op == "max" and 0 in (a, b):
            other = b if a == 0 else a
            if isinstance(other, str) and self.defs[other].kind in ("input", "data"):
                return other  # sizes bound from inputs or computed by kernels are never negative
        simplified = _simplify(op, a, b)
        if simplified is not None:
            return simplified
        if op in ("add", "mul", "max", "min", "bcast", "same") and str(a) > str(b):
            a, b = b, a  # commutative: one spelling per expression
        key = (op, a, b)
        if key not in self._memo:
            name = self._fresh("s")
            self.defs[name] = DimDef("expr", op, (a, b))
            self._memo[key] = name
        if op in CHECKED_OPS:
            self.checks.append(self._memo[key])
        return self._memo[key]

    # Convenience spellings used by shape inference.
    def add(self, a: Dim, b: Dim) -> Dim:
        return self.expr("add", a, b)

    def sub(self, a: Dim, b: Dim) -> Dim:
        return self.expr("sub", a, b)

    def mul(self, a: Dim, b: Dim) -> Dim:
        return self.expr("mul", a, b)

    def floordiv(self, a: Dim, b: Dim) -> Dim:
        return self.expr("floordiv", a, b)

    def ceildiv(self, a: Dim, b: Dim) -> Dim:
        return self.expr("ceildiv", a, b)

    def product(self, dims) -> Dim:
        out: Dim = 1
        for d in dims:
            out = self.mul(out, d)
        return out

    def total(self, dims) -> Dim:
        out: Dim = 0
        for d in dims:
            out = self.add(out, d)
        return out

    def broadcast(self, a: Dim, b: Dim) -> Dim:
        """Numpy broadcasting of two dims; symbolic pairs are checked at run time."""
        if a == b or b == 1:
            return a
        if a == 1:
            return b
        return self.expr("bcast", a, b)

    def same(self, a: Dim, b: Dim) -> Dim:
        """Two dims the op requires to be equal (checked at run time if symbolic)."""
        if a == b:
            return a
        if isinstance(a, int) and isinstance(b, int):
            raise ShapeError(f"dims {a} and {b} must be equal")
        return self.expr("same", a, b)

    def dependencies(self, name: str) -> list[str]:
        d = self.defs[name]
        return [x for x in d.args if isinstance(x, str)]


def _simplify(op: str, a: Dim, b: Dim) -> Dim | None:
    if op == "add":
        if a == 0:
            return b
        if b == 0:
            return a
    elif op == "sub":
        if b == 0:
            return a
    elif op == "mul":
        if a == 1:
            return b
        if b == 1:
            return a
        if a == 0 or b == 0:
            return 0
    elif op in ("floordiv", "ceildiv"):
        if b == 1:
            return a
    elif op in ("max", "min", "same", "bcast") and a == b:
        return a
    return None


def broadcast_shapes(table: DimTable, *shapes: Shape) -> Shape:
    rank = max(len(s) for s in shapes)
    out: list[Dim] = [1] * rank
    for s in shapes:
        padded = (1,) * (rank - len(s)) + tuple(s)
        for i, d in enumerate(padded):
            out[i] = table.broadcast(out[i], d)
    return tuple(out)


# The largest tensor onnxc compiles: far beyond any machine it targets, and far below the
# 2^63 bytes where the size arithmetic of generated code would overflow.
MAX_TENSOR_BYTES = 1 << 40


def check_size(shape: Shape, itemsize: int, what: str) -> None:
    """Refuse a shape whose static dims alone make a tensor over MAX_TENSOR_BYTES. A zero dim
    counts as one: the strides of a [0, 2**62] tensor overflow just the same."""
    size = itemsize
    for d in shape:
        if isinstance(d, int):
            size *= max(d, 1)
    if size > MAX_TENSOR_BYTES:
        raise ShapeError(f"{what} of shape {list(shape)} would take {size} bytes, over onnxc's limit of "
                         f"{MAX_TENSOR_BYTES} (1 TiB)")


def is_static(shape: Shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def num_elements(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
