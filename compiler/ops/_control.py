"""Shared pieces of the control-flow ops (If, Loop, Scan): typing a body and merging shapes.

A body is an IR graph (``node.subgraphs[attr]``) that reads enclosing values
directly. Inference gives its formal inputs their types, infers it like any
graph and reads the types of its outputs. A dim of a control-flow output is
kept when every path agrees on it and the enclosing graph knows it (an int or a
symbol of an enclosing value); otherwise the node computes it at run time.
"""
from __future__ import annotations

import copy
from typing import Optional

from .. import dtypes as dt
from ..dims import Dim, Shape
from ..errors import ShapeError, UnsupportedError
from ..ir import Graph, Node, Value, captured_values, free_values


def infer_body(node: Node, attr: str, formal: list[tuple[dt.DType, Shape]], dims,
               body: Optional[Graph] = None) -> list[Value]:
    """Type the formal inputs of ``node``'s body ``attr`` and infer it; returns its outputs."""
    from ..passes.infer import infer_shapes
    body = node.subgraphs[attr] if body is None else body
    if len(formal) != len(body.inputs):
        raise ShapeError(f"{node.label}: body {attr!r} takes {len(body.inputs)} inputs, the op gives it {len(formal)}")
    for v, spec in zip(body.inputs, formal):
        dtype, shape = spec[0], spec[1]
        if v.dtype is not None and v.dtype != dtype:
            raise ShapeError(f"{node.label}: body {attr!r} input {v.name!r} is declared {v.dtype}, the op gives it {dtype}")
        v.dtype, v.shape = dtype, (tuple(shape) if shape is not None else None)
        v.kind = spec[2] if len(spec) > 2 else "tensor"
    saved = dims.checks
    try:
        infer_shapes(body)
    finally:
        dims.checks = saved
    for v in body.outputs:
        if v.dtype is None or (v.shape is None and v.is_tensor):
            raise ShapeError(f"{node.label}: body {attr!r} output {v.name!r} has no type")
        if v.dtype.name == "string":
            raise UnsupportedError(f"{node.label}: string body outputs are not supported")
    return body.outputs


def clone_body(body: Graph) -> Graph:
    """A copy of a body for trial inference: its own nodes and values, the enclosing ones shared."""
    memo: dict[int, object] = {id(body.dims): body.dims, id(body._names): body._names}
    for v in free_values(body):
        memo[id(v)] = v
    for n in _all_nodes(body):
        for v in n.inputs:
            if v is not None and v.const is not None:
                memo[id(v)] = v  # constants are not edited: share, do not copy the arrays
        for attr_value in n.attrs.values():
            memo[id(attr_value)] = attr_value
    return copy.deepcopy(body, memo)


def _all_nodes(g: Graph):
    for n in g.nodes:
        yield n
        for b in n.subgraphs.values():
            yield from _all_nodes(b)


def known_symbols(node: Node) -> set[str]:
    """Symbols the enclosing graph knows when ``node`` runs: dims of everything it reads."""
    out: set[str] = set()
    for v in list(node.inputs) + captured_values(node):
        if v is not None and v.shape is not None:
            out.update(d for d in v.shape if isinstance(d, str))
    return out


def merged_dim(node: Node, dims, key: str, candidates: list[Dim], known: set[str]) -> Dim:
    """One output dim from what each path gives: kept if all agree and it is known outside,
    else a symbol the node sets at run time (the same symbol each time ``key`` is asked)."""
    first = candidates[0]
    if all(c == first for c in candidates) and (isinstance(first, int) or first in known):
        return first
    sym = node.memo.get(("dim", key))
    if sym is None or sym not in dims:
        sym = dims.data(f"{node.label} output {key}")
        node.memo[("dim", key)] = sym
    return sym


def scalar_input(ctx, i: int, what: str, dtypes: tuple) -> None:
    v = ctx.node.input(i)
    if v is None:
        return
    if v.dtype not in dtypes:
        raise ctx.fail(f"{what} must be {' or '.join(t.name for t in dtypes)}, not {v.dtype}")
    if any(isinstance(d, int) and d != 1 for d in v.shape):
        raise ctx.fail(f"{what} must hold one element, its shape is {v.shape}")


def element_shape(dims, shapes: list, origin: str) -> Optional[Shape]:
    """The element shape a sequence records: dims all elements agree on, fresh symbols
    (described, never bound) for the others; None when no element says its rank."""
    shapes = [s for s in shapes if s is not None]
    if not shapes:
        return None
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return None  # declared and actual ranks disagree: the rank is learnt at run time
    return tuple(shapes[0][a] if all(s[a] == shapes[0][a] for s in shapes) else dims.data(f"{origin} element", "e")
                 for a in range(rank))


def result(v: Value, dtype=None, shape=None):
    """An inference result that keeps ``v``'s kind (tensor or container)."""
    return (dtype or v.dtype, v.shape if shape is None else shape, v.kind)
