"""Op registry: each op module registers an :class:`OpDef` for a domain and opset range.

Attributes are typed and defaulted from the ONNX schema of the node's opset,
the same source the ONNX reference implementation uses; an attribute the
schema does not know is an error.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import pkgutil
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from ..errors import ModelError, ShapeError

if TYPE_CHECKING:
    from ...codegen.kernel import Kernel, KernelContext
    from ..dims import DimTable, Shape
    from ..dtypes import DType
    from ..ir import Node, Value

_REGISTRY: dict[tuple[str, str], list[tuple[int, int, type["OpDef"]]]] = {}
MAX_OPSET = 10_000


def register(op_type: str, *, since: int = 1, until: int = MAX_OPSET, domain: str = ""):
    """Class decorator: ``@register("Relu", since=6)`` (inclusive opset range of ``domain``)."""
    def deco(cls: type[OpDef]) -> type[OpDef]:
        cls.op_type = op_type
        cls.domain = domain
        _REGISTRY.setdefault((domain, op_type), []).append((since, until, cls))
        return cls
    return deco


# Ops registered for one compile only (custom-op libraries): (domain, op_type) -> entries.
_EXTRA: contextvars.ContextVar[dict] = contextvars.ContextVar("onnxc_extra_ops", default={})


@contextlib.contextmanager
def extra_ops(entries: dict[tuple[str, str], list[tuple[int, int, type["OpDef"]]]]):
    """Make ``entries`` visible to :func:`lookup` inside the ``with`` block (this thread/context)."""
    token = _EXTRA.set({**_EXTRA.get(), **entries})
    try:
        yield
    finally:
        _EXTRA.reset(token)


def lookup(domain: str, op_type: str, opset: int) -> Optional["OpDef"]:
    _load_all()
    for since, until, cls in list(_EXTRA.get().get((domain, op_type), ())) + _REGISTRY.get((domain, op_type), []):
        if since <= opset <= until:
            return cls()
    return None


def supported_ops() -> list[tuple[str, str, int, int]]:
    _load_all()
    return sorted((d, o, s, u) for (d, o), entries in _REGISTRY.items() for s, u, _ in entries)


_loaded = False
_loading = threading.RLock()


def _load_all() -> None:
    """Import every module of this package once, so their decorators run. Under a lock, and
    marked loaded only when every module is in: a session's background build for the shapes
    it was fed (runtime/specialise.py), or another thread's session, may look an op up while
    the first lookup is still importing (it found half of the registry: "the model uses
    operators onnxc does not support", for Mul and Relu). (Re-entrant: an op module's import
    may look up another op.)"""
    global _loaded
    if _loaded:
        return
    with _loading:
        if _loaded:
            return
        from . import __name__ as ops_name
        from . import __path__ as ops_path
        for info in pkgutil.iter_modules(ops_path):
            if not info.name.startswith("_") and info.name != "registry":
                importlib.import_module(f"{ops_name}.{info.name}")
        _loaded = True


@dataclass
class InferContext:
    """What shape inference of one node may read and create."""
    node: "Node"
    dims: "DimTable"
    sym_values: dict = field(default_factory=dict)

    def sym_value(self, i: int) -> Optional[tuple]:
        """Elements of an int tensor as dims (ints or symbols), if known at compile time."""
        v = self.node.input(i)
        if v is None:
            return None
        if v.const is not None and v.const.dtype.kind in "iu" and v.const.ndim <= 1:
            return tuple(int(x) for x in v.const.reshape(-1))
        return v.sym_value

    def sym_array(self, i: int) -> Optional[np.ndarray]:
        """``sym_value(i)`` as an object array of the input's (static) shape, for numpy indexing."""
        dims = self.sym_value(i)
        v = self.node.input(i)
        if dims is None or not all(isinstance(d, int) for d in v.shape):
            return None
        out = np.empty(len(dims), dtype=object)
        out[:] = list(dims)
        return out.reshape(v.shape)

    def set_sym_value(self, output: int, dims) -> None:
        """Record that output ``output`` holds these dims (see Value.sym_value)."""
        self.sym_values[output] = tuple(dims)

    def fail(self, msg: str) -> ShapeError:
        return ShapeError(f"{self.node.label}: {msg}")

    def const(self, i: int) -> Optional[np.ndarray]:
        v = self.node.input(i)
        return None if v is None else v.const

    def has(self, i: int) -> bool:
        return self.node.input(i) is not None

    def inp(self, i: int) -> "Value":
        v = self.node.input(i)
        if v is None:
            raise self.fail(f"input {i} is required")
        return v


class OpDef:
    """One ONNX operator: attribute defaults, shape/dtype inference and lowering."""
    op_type: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    # Whether constant inputs give a constant output (so the node may be folded).
    foldable: ClassVar[bool] = True
    # Control flow: the kernel allocates its outputs itself (their size is known only once it
    # ran) and reports the dims it computed.
    allocates_outputs: ClassVar[bool] = False
    # Parameter names in generated code for an op ONNX has no schema of (else input0, ...).
    formal_inputs: ClassVar[tuple[str, ...]] = ()
    formal_outputs: ClassVar[tuple[str, ...]] = ()

    def infer(self, node: "Node", ctx: InferContext) -> list[tuple["DType", "Shape"]]:
        raise NotImplementedError(f"{type(self).__name__} has no shape inference")

    def in_place(self, node: "Node") -> list[int]:
        """Inputs whose memory the output may take over when they die at this node: the
        kernel reads element i of such an input only to compute element i of the output."""
        return []

    def input_views(self, node: "Node") -> list[tuple[int, int]]:
        """Inputs the memory planner may place inside output 0, as (input index, byte offset):
        their producers then write them where this node would copy them, and the kernel skips
        copying an input it finds already there."""
        return []

    def lower(self, node: "Node", k: "KernelContext") -> "Kernel":
        raise NotImplementedError(f"{type(self).__name__} has no lowering")

    def inline(self, node: "Node") -> Optional[tuple[list["Node"], list["Value"]]]:
        """The nodes to run instead and the values that replace the outputs (control flow known
        at compile time, a contrib op made of standard ops); None to keep the node."""
        return None

    def evaluate(self, node: "Node") -> Optional[list[np.ndarray]]:
        """The outputs from constant inputs, for constant folding, where onnxc's kernel does not
        compute what onnx's reference evaluator does (whose answer can depend on the installed
        packages); None to use the reference evaluator."""
        return None

    def dims_value(self, node: "Node", ctx: InferContext) -> Optional[np.ndarray]:
        """Ops that move or combine shape data (Gather, Concat, Add ...) compute their output's
        elements as dims from the inputs' ``ctx.sym_array``; None when unknown."""
        return None


# --- attributes ---------------------------------------------------------------

def _attr_value(a: AttributeProto) -> Any:
    t = a.type
    if t == AttributeProto.INT:
        return int(a.i)
    if t == AttributeProto.FLOAT:
        return float(a.f)
    if t == AttributeProto.STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == AttributeProto.INTS:
        return tuple(int(x) for x in a.ints)
    if t == AttributeProto.FLOATS:
        return tuple(float(x) for x in a.floats)
    if t == AttributeProto.STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in a.strings)
    if t == AttributeProto.TENSOR:
        try:
            return numpy_helper.to_array(a.t)
        except Exception as e:  # an unknown data_type, data that does not fill the dims
            raise ModelError(f"attribute {a.name!r}: its tensor cannot be read: {e}") from e
    if t == AttributeProto.GRAPH:
        return a.g
    if t == AttributeProto.GRAPHS:
        return tuple(a.graphs)
    if t == AttributeProto.SPARSE_TENSOR:
        return a.sparse_tensor
    if t == AttributeProto.TYPE_PROTO:
        return a.tp
    raise ModelError(f"attribute {a.name!r} has unsupported type {t}")


def typed_attributes(proto: onnx.NodeProto, schema: Optional[onnx.defs.OpSchema], label: str) -> dict[str, Any]:
    """Node attributes as Python values, the schema's defaults filled in."""
    attrs: dict[str, Any] = {}
    for a in proto.attribute:
        if a.ref_attr_name:
            raise ModelError(f"{label}: attribute {a.name!r} refers to a function attribute outside a function")
        if schema is not None:
            spec = schema.attributes.get(a.name)
            if spec is None:
                raise ModelError(f"{label}: unknown attribute {a.name!r}")
            if a.type != spec.type and a.type != AttributeProto.UNDEFINED:
                raise ModelError(f"{label}: attribute {a.name!r} has type "
                                 f"{AttributeProto.AttributeType.Name(a.type)}, the spec says "
                                 f"{AttributeProto.AttributeType.Name(spec.type)}")
        attrs[a.name] = _attr_value(a)
    if schema is not None:
        for name, spec in schema.attributes.items():
            if name not in attrs and spec.required:
                raise ModelError(f"{label}: required attribute {name!r} is missing")
        attrs = schema_defaults(schema) | attrs
    return attrs


def schema_defaults(schema: onnx.defs.OpSchema) -> dict[str, Any]:
    """The attributes that have a default in the schema, with that default."""
    return {name: _attr_value(spec.default_value) for name, spec in schema.attributes.items()
            if spec.default_value is not None and spec.default_value.type != AttributeProto.UNDEFINED}


def schema_for(op_type: str, opset: int, domain: str) -> Optional[onnx.defs.OpSchema]:
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
