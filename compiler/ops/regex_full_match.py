from ...codegen.literals import c_literal
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._elementwise import Unary
from .registry import register

# RE2 classes written as POSIX bracket contents.
_CLASSES = {"w": "[:alnum:]_", "d": "[:digit:]", "s": "[:space:]"}


def posix_pattern(pattern: str, label: str) -> str:
    """An RE2 pattern (the spec's syntax) as a POSIX extended one with the same full-match
    meaning: \\w \\d \\s (also inside brackets), escaped punctuation, (?:...). Constructs
    POSIX cannot express (lazy quantifiers, lookaround, named groups) are refused."""
    out: list[str] = []
    bracket: list[str] | None = None   # contents of an open [...]
    dash = False                       # an escaped '-' in it: written last, where it is literal
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            i += 2
            if e.lower() in _CLASSES:
                cls = _CLASSES[e.lower()]
                if bracket is not None:
                    if e.isupper():
                        raise UnsupportedError(f"{label}: negated class \\{e} inside brackets")
                    bracket.append(cls)
                else:
                    out.append(f"[{'^' if e.isupper() else ''}{cls}]")
            elif e.isalnum() and not (e in "bB" and bracket is None):
                raise UnsupportedError(f"{label}: escape \\{e} in the pattern")
            elif bracket is not None:
                if e == "-":
                    dash = True
                elif e == "]":
                    raise UnsupportedError(f"{label}: escaped ] inside brackets")
                else:
                    bracket.append(e)  # punctuation is literal inside POSIX brackets
            else:
                out.append("\\" + e)  # escaped punctuation; \\b \\B: GNU word boundaries
            continue
        if bracket is not None:
            if c == "]" and bracket and bracket != ["^"]:
                out.append("[" + "".join(bracket) + ("-" if dash else "") + "]")
                bracket, dash = None, False
            else:
                bracket.append(c)
        elif c == "[":
            bracket = []
        elif c == "(" and pattern[i + 1:i + 3] == "?:":
            out.append("(")
            i += 3
            continue
        elif c == "(" and pattern[i + 1:i + 2] == "?":
            raise UnsupportedError(f"{label}: group syntax {pattern[i:i + 3]!r} in the pattern")
        elif c in "*+?}" and pattern[i + 1:i + 2] == "?":
            raise UnsupportedError(f"{label}: lazy quantifiers in the pattern")
        else:
            out.append(c)
        i += 1
    if bracket is not None:
        raise UnsupportedError(f"{label}: unterminated [ in the pattern")
    return "^(" + "".join(out) + ")$"


@register("RegexFullMatch", since=20)
class RegexFullMatch(Unary):
    """Y = whether the whole string matches ``pattern`` (RE2 syntax, compiled as POSIX ERE)."""
    types = (dt.STRING,)
    foldable = False

    def out_dtype(self, x):
        return dt.BOOL

    def lower(self, node, k):
        pattern = posix_pattern(node.attrs.get("pattern") or "", node.label)
        return k.kernel("c/regex_full_match.c.j2", ("c/helpers/regex.c.j2",), x=k.input(0).data(),
                        y=k.out.data(), pattern=c_literal(pattern, dt.STRING))
