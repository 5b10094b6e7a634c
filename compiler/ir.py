"""The typed IR: values, nodes and a graph in topological order.

A :class:`Value` has a dtype and a shape (ints and symbol names); it may carry a
constant numpy array (an initializer or a folded result). A :class:`Node` holds
its op implementation, typed attributes, input values (``None`` for an omitted
optional input) and output values. Passes edit the graph through the few
methods of :class:`Graph`, which keep producer/consumer links consistent.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional

import numpy as np

from . import dtypes as dt
from .dims import DimTable, Shape, is_static

if TYPE_CHECKING:
    from .ops.registry import OpDef


@dataclass(eq=False)
class Value:
    name: str
    dtype: Optional[dt.DType] = None
    shape: Optional[Shape] = None
    const: Optional[np.ndarray] = None
    producer: Optional["Node"] = field(default=None, repr=False)
    # For small int64 tensors that hold dims (e.g. the output of Shape on a symbolic
    # tensor): the elements as dims, so shape arithmetic stays symbolic.
    sym_value: Optional[tuple] = None
    # "tensor", or a container: "sequence" (of tensors of ``dtype``; ``shape`` then describes
    # the elements), "optional" (a tensor or nothing), "optional_sequence"; or "map_sequence":
    # ZipMap's sequence of maps, stored as its [N, C] values (the keys are ZipMap's labels); or
    # "map": a graph input map(key_dtype, dtype), parallel key and value arrays at run time.
    kind: str = "tensor"
    key_dtype: Optional[dt.DType] = None

    @property
    def is_tensor(self) -> bool:
        """Stored as a plain tensor in generated code."""
        return self.kind in ("tensor", "map_sequence")

    @property
    def rank(self) -> int:
        assert self.shape is not None, f"value {self.name!r} has no shape yet"
        return len(self.shape)

    @property
    def static(self) -> bool:
        return self.shape is not None and is_static(self.shape)

    def type_str(self) -> str:
        dims = ",".join(str(d) for d in self.shape) if self.shape is not None else "?"
        text = f"{self.dtype}[{dims}]"
        if self.kind == "map":
            return f"map<{self.key_dtype},{self.dtype}>"
        return text if self.kind == "tensor" else f"{self.kind}<{text}>"


@dataclass(eq=False)
class Node:
    op_type: str
    domain: str
    name: str
    inputs: list[Optional[Value]]
    outputs: list[Value]
    attrs: dict[str, Any]
    opset: int                       # the model's opset for this node's domain
    impl: "OpDef" = field(repr=False, default=None)
    version: int = 0                 # since_version of the schema in effect
    dim_checks: list = field(default_factory=list)  # symbols to verify at run time before the node runs
    # Control flow: attribute name -> body graph (If's branches, Loop's and Scan's body). A body
    # reads values of enclosing graphs directly; see :func:`captured_values`.
    subgraphs: dict[str, "Graph"] = field(default_factory=dict)
    # Inference decisions an op keeps between passes (e.g. which Loop state dims vary).
    memo: dict[str, Any] = field(default_factory=dict)

    def input(self, i: int) -> Optional[Value]:
        return self.inputs[i] if i < len(self.inputs) else None

    @property
    def label(self) -> str:
        return f"{self.op_type} node {self.name!r}" if self.name else f"{self.op_type} node"


@dataclass
class ModelMeta:
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    graph_name: str = ""
    graph_description: str = ""
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


class Graph:
    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.output_names: list[str] = []   # the model's names; stable while passes swap values
        self.nodes: list[Node] = []
        self.dims = DimTable()
        self.opsets: dict[str, int] = {}
        self.meta = ModelMeta()
        self._names: set[str] = set()

    # --- construction -------------------------------------------------
    def new_value(self, name: str, dtype: dt.DType | None = None, shape: Shape | None = None,
                  const: np.ndarray | None = None) -> Value:
        v = Value(self.unique_name(name), dtype, shape, const)
        return v

    def unique_name(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            i += 1
            name = f"{base}__{i}"
        self._names.add(name)
        return name

    def add_node(self, node: Node) -> Node:
        for out in node.outputs:
            out.producer = node
        self.nodes.append(node)
        return node

    # --- queries ------------------------------------------------------
    def values(self) -> Iterator[Value]:
        seen: set[Value] = set()
        for v in self._all_values():
            if v not in seen:
                seen.add(v)
                yield v

    def _all_values(self) -> Iterator[Value]:
        yield from self.inputs
        for n in self.nodes:
            yield from (v for v in n.inputs if v is not None)
            yield from n.outputs
        yield from self.outputs

    def consumers(self) -> dict[Value, list[Node]]:
        """value -> nodes that read it, captures of bodies included (computed on demand)."""
        out: dict[Value, list[Node]] = {}
        for n in self.nodes:
            for v in reads(n):
                out.setdefault(v, []).append(n)
        return out

    # --- edits ----------------------------------------------------------
    def replace_uses(self, old: Value, new: Value) -> None:
        """Every reader of ``old`` reads ``new`` instead (graph outputs too)."""
        for n in self.nodes:
            n.inputs = [new if v is old else v for v in n.inputs]
            for body in n.subgraphs.values():
                body.replace_uses(old, new)
        self.outputs = [new if v is old else v for v in self.outputs]

    def remove_nodes(self, dead: set[Node]) -> None:
        self.nodes = [n for n in self.nodes if n not in dead]

    def dump(self, indent: str = "") -> str:
        """A compact text form used in pass tests and debugging."""
        lines = [f"{indent}graph {self.name}(" + ", ".join(f"{v.name}: {v.type_str()}" for v in self.inputs) + ")"]
        for n in self.nodes:
            ins = ", ".join(v.name if v is not None else "_" for v in n.inputs)
            outs = ", ".join(f"{v.name}: {v.type_str()}" for v in n.outputs)
            lines.append(f"{indent}  {outs} = {n.op_type}({ins})")
            for attr, body in n.subgraphs.items():
                lines.append(f"{indent}    {attr}:")
                lines.append(body.dump(indent + "      "))
        lines.append(f"{indent}  return " + ", ".join(v.name for v in self.outputs))
        return "\n".join(lines)


def captured_values(node: Node) -> list[Value]:
    """Values of enclosing graphs that ``node``'s bodies read (constants excluded), in order."""
    out: dict[Value, None] = {}   # (ordered, each value once)
    for body in node.subgraphs.values():
        out.update(dict.fromkeys(free_values(body)))
    return list(out)


def free_values(graph: Graph) -> list[Value]:
    defined = set(graph.inputs)
    out: dict[Value, None] = {}   # (ordered, each value once)
    for n in graph.nodes:
        for v in list(n.inputs) + captured_values(n):
            if v is not None and v.const is None and v not in defined:
                out.setdefault(v)
        defined.update(n.outputs)
    for v in graph.outputs:
        if v.const is None and v not in defined:
            out.setdefault(v)
    return list(out)


def reads(node: Node) -> list[Value]:
    """Everything a node reads: its inputs and, for control flow, its captures."""
    out = [v for v in node.inputs if v is not None]
    return out + captured_values(node) if node.subgraphs else out
