"""Turning untrusted model strings into safe C: identifiers, comments and literals.

Nothing taken from a model reaches generated source except through these
functions: identifiers keep only ``[A-Za-z0-9_]`` (made unique per scope),
comments escape anything that could end or splice them, and string literals
escape every byte that is not plainly safe.
"""
from __future__ import annotations

import re

_MAX_IDENT = 40
_MAX_COMMENT = 160
_SAFE_LITERAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;=+()[]<>{}#@!&|^~%$'/")
_SAFE_COMMENT = _SAFE_LITERAL | {'"'}


class Mangler:
    """Makes readable, unique C identifiers in one scope."""

    def __init__(self, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self._taken: set[str] = set(reserved)
        self._given: dict[tuple[str, str], str] = {}

    def __call__(self, name: str, prefix: str) -> str:
        key = (prefix, name)
        if key in self._given:
            return self._given[key]
        body = re.sub(r"[^A-Za-z0-9_]", "_", name)[:_MAX_IDENT].rstrip("_")
        ident = self._unique(prefix + (body or "x"))  # a name with no usable characters still gets one
        self._given[key] = ident
        return ident

    def derived(self, ident: str, suffix: str) -> str:
        """A unique identifier named after ``ident`` (one this scope gave): ``ident + suffix``,
        kept whole so the two read as a pair, numbered when taken."""
        return self._unique(ident + suffix)

    def _unique(self, base: str) -> str:
        ident, i = base, 1
        while ident in self._taken:
            i += 1
            ident = f"{base}_{i}"
        self._taken.add(ident)
        return ident


def comment(text: str) -> str:
    """Text safe inside a ``/* */`` or ``//`` comment: one line, no ``*/``, no ``\\``, no trigraphs."""
    if len(text) > _MAX_COMMENT:
        text = text[:_MAX_COMMENT] + "..."
    out = []
    for ch in text:
        if ch in _SAFE_COMMENT:
            out.append(ch)
        else:
            out.append(f"<{ord(ch):02x}>")
    return "".join(out)


def c_string(text: str, limit: int | None = 200) -> str:
    """A C string literal (quotes included) whose bytes are the UTF-8 of ``text``."""
    return c_bytes(text.encode("utf-8")[:limit])


def c_bytes(data: bytes) -> str:
    """A C string literal (quotes included) holding exactly ``data``: every byte that is not
    plainly safe is an octal escape, so no content can end the literal or form a trigraph."""
    out = []
    for b in data:
        ch = chr(b)
        out.append(ch if ch in _SAFE_LITERAL else f"\\{b:03o}")
    return '"' + "".join(out) + '"'
