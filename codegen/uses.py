"""What a node function's body names, recorded as the body is written, never read back from it.

A node function takes only the tensors and dims its body reads (C warns about unused
parameters, and a call passes nothing it does not need). The names a lowering and its template
can write are handed to them as :class:`CText`: a ``str`` that knows the identifiers it spells
and records them in the node's :class:`Uses` at the moment it becomes text (``str()``,
``format()``, an f-string, ``%s``, Jinja's ``{{ }}`` and ``~``, the ``join`` filter). Text
built from it by ``+`` or by ``codegen.cexpr`` stays a ``CText`` carrying the same identifiers,
so an expression a template receives (an input's element count, a stride) counts only if the
template writes it. Comparing, hashing or slicing a name records nothing.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass
class Reads:
    """The identifiers one function's text names: tensor parameters and dim variables."""
    tensors: set[str] = field(default_factory=set)
    dims: set[str] = field(default_factory=set)

    def __ior__(self, other: Reads) -> Reads:
        self.tensors |= other.tensors
        self.dims |= other.dims
        return self


class Uses:
    """One node's recorder. Text written while its lowering runs goes to ``lowered``; the
    emitter points it at each function's own :class:`Reads` while it renders that function's
    template (``into``)."""

    def __init__(self) -> None:
        self.lowered = Reads()
        self._into = self.lowered

    def tensor(self, name: str) -> CText:
        """A tensor parameter's name, as the lowering and its templates see it."""
        return CText(name, ((self, "tensor", name),))

    def dim(self, var: str) -> DimVar:
        """A dim variable (``dim_*``), as the lowering and its templates see it."""
        return DimVar(var, ((self, "dim", var),))

    def mark(self, kind: str, name: str) -> None:
        (self._into.tensors if kind == "tensor" else self._into.dims).add(name)

    @contextmanager
    def into(self, reads: Reads) -> Iterator[Reads]:
        """Record into ``reads`` for the duration (a function's template being rendered)."""
        before, self._into = self._into, reads
        try:
            yield reads
        finally:
            self._into = before


class CText(str):
    """C text spelling identifiers of one node function (``refs``); it records them in their
    :class:`Uses` when it is turned into text."""
    refs: tuple

    def __new__(cls, text: str, refs: tuple = ()) -> CText:
        self = super().__new__(cls, text)
        self.refs = refs
        return self

    def use(self) -> None:
        for uses, kind, name in self.refs:
            uses.mark(kind, name)

    def __str__(self) -> str:
        self.use()
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        self.use()
        return str.__format__(self, spec)

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return CText(str.__add__(plain(self), plain(other)), self.refs + refs(other))

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return CText(str.__add__(plain(other), plain(self)), refs(other) + self.refs)

    def format(self, *args: Any, **kwargs: Any) -> Any:
        """A pattern (``t.load("{}")``) filled in later, by a template: still names what it named."""
        text = str.format(plain(self), *(plain(a) for a in args), **{k: plain(v) for k, v in kwargs.items()})
        return CText(text, self.refs + tuple(r for a in [*args, *kwargs.values()] for r in refs(a)))

    def replace(self, old: Any, new: Any, count: int = -1) -> Any:
        return CText(str.replace(plain(self), plain(old), plain(new), count), self.refs + refs(new))

    def __reduce__(self) -> tuple:
        return (str, (plain(self),))   # a copy outside the emitter is plain text


class DimVar(CText):
    """A dim variable's name: the one kind of identifier a size expression of
    ``codegen.cexpr`` holds as a symbol (text built from it by ``+`` is a plain ``CText``)."""


def plain(text: Any) -> Any:
    """``text`` without recording a use (the emitter's own bookkeeping; ints pass through)."""
    return str.__str__(text) if isinstance(text, CText) else text


def refs(text: Any) -> tuple:
    return text.refs if isinstance(text, CText) else ()


def fill(pattern: str, *parts: Any) -> Any:
    """``pattern.format(*parts)`` that records nothing yet: the result carries the parts'
    identifiers (a plain ``str`` when they name none)."""
    text = pattern.format(*(plain(p) for p in parts))
    carried = tuple(r for p in parts for r in refs(p))
    return CText(text, carried) if carried else text


def join(separator: str, parts: list) -> Any:
    """``separator.join(parts)`` that records nothing yet (see :func:`fill`)."""
    text = separator.join(plain(p) for p in parts)
    carried = tuple(r for p in parts for r in refs(p))
    return CText(text, carried) if carried else text
