"""IR verifier: run after every pass in tests (and on demand) to catch broken invariants."""
from __future__ import annotations

from ..dims import DimTable
from ..errors import OnnxcError
from ..ir import Graph, Value


class VerifyError(OnnxcError):
    pass


def verify(graph: Graph, outer: frozenset = frozenset()) -> None:
    """Check ``graph`` (and its bodies); ``outer``: the values enclosing graphs define."""
    defined: set[Value] = set(graph.inputs) | set(outer)
    names: set[str] = set()
    for v in graph.inputs:
        _check_value(v, graph.dims)
    for node in graph.nodes:
        if node.impl is None:
            raise VerifyError(f"{node.label} has no implementation")
        for v in node.inputs:
            if v is None:
                continue
            if v.const is None and v not in defined:
                raise VerifyError(f"{node.label} reads {v.name!r} before it is defined")
            _check_value(v, graph.dims)
        for o in node.outputs:
            if o in defined:
                raise VerifyError(f"{o.name!r} is defined twice")
            if o.producer is not node:
                raise VerifyError(f"{o.name!r} does not record {node.label} as its producer")
            defined.add(o)
            _check_value(o, graph.dims)
        for body in node.subgraphs.values():
            verify(body, frozenset(defined))
    for v in graph.values():
        if v.name in names:
            raise VerifyError(f"two values are named {v.name!r}")
        names.add(v.name)
    if len(graph.outputs) != len(graph.output_names):
        raise VerifyError("graph outputs and output names disagree")
    for v in graph.outputs:
        if v.const is None and v not in defined:
            raise VerifyError(f"graph output {v.name!r} is never computed")


def _check_value(v, dims: DimTable) -> None:
    if v.dtype is None or (v.shape is None and v.is_tensor):
        raise VerifyError(f"{v.name!r} has no type")
    for d in v.shape or ():
        if isinstance(d, str) and d not in dims:
            raise VerifyError(f"{v.name!r} uses undefined symbol {d!r}")
        if isinstance(d, int) and d < 0:
            raise VerifyError(f"{v.name!r} has negative dim {d}")
    if v.const is not None and (v.const.dtype != v.dtype.np or tuple(v.const.shape) != tuple(v.shape)):
        raise VerifyError(f"constant {v.name!r} disagrees with its type {v.type_str()}")
