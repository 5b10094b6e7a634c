"""Small helpers that build C integer expressions from dims, folding constants."""
from __future__ import annotations

import re
from typing import Iterable, Union

from .uses import join

CExpr = Union[int, str]   # a str may be a uses.CText: the identifiers it names travel with it


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
    return terms[0] if len(terms) == 1 else join("", ["(", join(" * ", terms), ")"])


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
    return terms[0] if len(terms) == 1 else join("", ["(", join(" + ", terms), ")"])


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


_DIM_FUNCTIONS = {
    "onnxc_dim_max": max, "onnxc_dim_min": min,
    "onnxc_dim_floordiv": lambda a, b: a // b if b else -1,
    "onnxc_dim_ceildiv": lambda a, b: -(-a // b) if b else -1,
    "onnxc_dim_mod": lambda a, b: a % b if b else -1,
}


def evaluate(expr: CExpr, values: dict[str, int]) -> int:
    """The value of a C integer expression this module (or a lowering) built from dims: names
    from ``values``, + - * / % (C division truncates), INT64_C(n), the onnxc_dim_* helpers.
    Raises ValueError on anything else."""
    import ast
    if isinstance(expr, int):
        return expr
    text = re.sub(r"\bINT64_C\((-?\d+)\)", r"\1", expr)
    text = re.sub(r"\((?:u?int64_t|size_t|int)\)", "", text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"not a dim expression: {expr}") from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.Div, ast.Mod)) and b != 0:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return q if isinstance(node.op, ast.Div) else a - b * q
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DIM_FUNCTIONS \
                and len(node.args) == 2 and not node.keywords:
            return _DIM_FUNCTIONS[node.func.id](ev(node.args[0]), ev(node.args[1]))
        raise ValueError(f"not a dim expression: {expr}")
    return ev(tree)
