"""onnxruntime's com.microsoft contrib ops that are compositions of standard ONNX ops.

Such an op checks its attributes and, during shape inference, becomes the standard nodes that
compute it (``OpDef.inline``): their inference validates the shapes, their kernels run it and
the fusion passes see ordinary MatMul, Add, LayerNormalization ... chains.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import onnx

from .. import dtypes as dt
from ..errors import ModelError, UnsupportedError
from ..ir import Node, Value
from .registry import OpDef, lookup, schema_defaults

MS = "com.microsoft"
# The ai.onnx opset of the standard nodes an expansion makes (Attention, RMSNormalization and
# RotaryEmbedding start at 23).
OPSET = 23


def attributes(node: Node, defaults: dict[str, Any]) -> dict[str, Any]:
    """The node's attributes over ``defaults`` (the names onnxruntime's schema has; None for
    one without a default); any other name is an error, as for ops with an ONNX schema."""
    for name in node.attrs:
        if name not in defaults:
            raise ModelError(f"{node.label}: unknown attribute {name!r}")
    return {n: v for n, v in defaults.items() if v is not None} | dict(node.attrs)


def invalid(node: Node, what: str) -> ModelError:
    return ModelError(f"{node.label}: {what}")


def refuse(node: Node, what: str) -> UnsupportedError:
    return UnsupportedError(f"{node.label}: {what} is not supported")


class Expansion:
    """Standard nodes built to replace one contrib node; values are named after its first output."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.nodes: list[Node] = []
        self._base = node.outputs[0].name if node.outputs else node.name
        self._count = 0

    def new(self, tag: str) -> Value:
        """A new value, to list among the outputs of a node."""
        return self._value(tag)

    def _value(self, tag: str, const: Optional[np.ndarray] = None) -> Value:
        self._count += 1
        v = Value(f"{self._base}__{tag}{self._count}")
        if const is not None:
            v.const = np.asarray(const, order="C")
            v.dtype, v.shape = dt.from_numpy(v.const.dtype), tuple(v.const.shape)
        return v

    def const(self, array, dtype=None) -> Value:
        return self._value("const", np.asarray(array, dtype=dtype))

    def op(self, op_type: str, inputs: Sequence[Optional[Value]], outputs: Optional[Sequence[Value]] = None,
           n_out: int = 1, **attrs: Any):
        """Append ``op_type`` (ai.onnx, opset OPSET) with the schema's defaults under ``attrs``;
        returns its output, or the list of them when there are several."""
        schema = onnx.defs.get_schema(op_type, OPSET, "")
        outs = list(outputs) if outputs is not None else [self._value(op_type.lower()) for _ in range(n_out)]
        node = Node(op_type, "", self.node.name, list(inputs), outs, schema_defaults(schema) | attrs, OPSET,
                    lookup("", op_type, OPSET), schema.since_version)
        for out in outs:
            out.producer = node
        self.nodes.append(node)
        return outs[0] if len(outs) == 1 else outs

    def contrib(self, op_type: str, inputs: Sequence[Optional[Value]], outputs: Optional[Sequence[Value]] = None,
                n_out: int = 1, **attrs: Any):
        """Append com.microsoft ``op_type`` (version 1; its inference fills in the defaults):
        for a product onnxc computes in one kernel that standard ops would split, such as
        MatMulIntegerToFloat."""
        outs = list(outputs) if outputs is not None else [self._value(op_type.lower()) for _ in range(n_out)]
        node = Node(op_type, MS, self.node.name, list(inputs), outs, dict(attrs), 1, lookup(MS, op_type, 1), 1)
        for out in outs:
            out.producer = node
        self.nodes.append(node)
        return outs[0] if len(outs) == 1 else outs

    def into(self, i: int) -> Optional[list[Value]]:
        """The contrib node's output ``i`` as the outputs list of the node that computes it."""
        return [self.node.outputs[i]] if i < len(self.node.outputs) else None

    def result(self) -> tuple[list[Node], list[Value]]:
        return self.nodes, list(self.node.outputs)


class Composite(OpDef):
    """A contrib op computed by standard nodes: subclasses implement ``expand``, which may take
    inputs below ``min_inputs`` (onnxruntime's required ones) as given."""
    min_inputs = 1

    def expand(self, node: Node, e: Expansion) -> None:
        raise NotImplementedError

    def inline(self, node: Node):
        if len(node.inputs) < self.min_inputs or any(v is None for v in node.inputs[:self.min_inputs]):
            raise invalid(node, f"{node.op_type} needs its first {self.min_inputs} input(s)")
        e = Expansion(node)
        self.expand(node, e)
        return e.result()


def one_value(e: Expansion, node: Node, v: Value, what: str) -> Value:
    """``v`` (a scale or zero point) as a scalar; it must hold one value, as a scalar or [1]."""
    if v.shape not in ((), (1,)):
        raise invalid(node, f"{what} must hold one value, got shape {list(v.shape)}")
    return e.op("Squeeze", [v]) if v.shape else v


def rms_inv_std(e: Expansion, x: Value, like: Value, axis: int, epsilon: float,
                outputs: Optional[list[Value]] = None) -> Value:
    """1 / sqrt(mean(x^2) + epsilon) over the axes from ``axis`` on, those axes kept as 1s;
    ``like`` is a typed value of x's type and rank (x may be a value the expansion makes)."""
    rank = len(like.shape)
    axes = e.const(np.arange(axis % rank, rank, dtype=np.int64))
    mean_square = e.op("ReduceMean", [e.op("Mul", [x, x]), axes], keepdims=1)
    std = e.op("Sqrt", [e.op("Add", [mean_square, e.const(np.array(epsilon, like.dtype.np))])])
    return e.op("Reciprocal", [std], outputs)


def skip_sum(e: Expansion, node: Node, bias: int, outputs: Optional[list[Value]] = None) -> Value:
    """input + skip + bias (input ``bias`` of the node, optional), added in that order."""
    total = e.op("Add", node.inputs[:2], outputs if node.input(bias) is None else None)
    if node.input(bias) is not None:
        total = e.op("Add", [total, node.inputs[bias]], outputs)
    return total
