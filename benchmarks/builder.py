"""A small graph builder, so the benchmark models read as dataflow: each call adds one
node and returns its output name; weights are seeded random initializers."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPSET = 17  # LayerNormalization needs 17; every benchmark model uses the same opset


class GraphBuilder:
    """Collects nodes and initializers under generated, unique names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, value: Any, dtype: Any = None) -> str:
        """An initializer holding ``value`` (numpy's dtype unless one is given)."""
        name = self._name("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, *values: int) -> str:
        """A 1-D int64 initializer: shapes, axes, pads given as tensors."""
        return self.const(np.array(values, np.int64))

    def he_weight(self, *shape: int, gain: float = 2.0) -> str:
        """Normal weights scaled by sqrt(gain / fan_in) (He: gain 2) so ReLU-like stacks keep activations
        near unit scale (constant or unscaled weights make outputs saturate or vanish, hiding numeric errors)."""
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        return self.const((self.rng.standard_normal(shape) * math.sqrt(gain / fan_in)).astype(np.float32))

    def matmul_weight(self, rows: int, cols: int) -> str:
        """A (rows, cols) MatMul right-hand side: fan-in is ``rows`` here, not ``cols``."""
        return self.const((self.rng.standard_normal((rows, cols)) * math.sqrt(2.0 / rows)).astype(np.float32))

    def uniform(self, low: float, high: float, *shape: int) -> str:
        return self.const(self.rng.uniform(low, high, shape).astype(np.float32))

    def normal(self, scale: float, *shape: int) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        """Adds one node with a single output and returns that output's name."""
        return self.op_multi(op_type, inputs, 1, **attrs)[0]

    def op_multi(self, op_type: str, inputs: Sequence[str], outputs: int, **attrs: Any) -> list[str]:
        name = self._name(op_type)
        names = [f"{name}_out{i}" if outputs > 1 else f"{name}_out" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=name, **attrs))
        return names

    def output(self, value: str, name: str) -> None:
        """Gives a graph output its public name (an Identity, as exporters write it)."""
        self.nodes.append(helper.make_node("Identity", [value], [name], name=f"output_{name}"))

    def model(self, graph_name: str, inputs: Sequence[onnx.ValueInfoProto],
              outputs: Sequence[onnx.ValueInfoProto]) -> onnx.ModelProto:
        """The finished model, checked by the onnx checker (full check, with shape inference)."""
        graph = helper.make_graph(self.nodes, graph_name, list(inputs), list(outputs), self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="onnxc-benchmarks")
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model
