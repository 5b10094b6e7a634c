"""Compile-time evaluation of one node on constant inputs (for constant folding).

Uses the ONNX reference implementation, which follows the spec; this runs only
while compiling, never when a compiled model runs.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ..errors import ShapeError
from ..ir import Node
from ..ops import registry


def run_node(node: Node) -> list[np.ndarray]:
    own = node.impl.evaluate(node)
    if own is not None:
        return own
    in_names = [f"i{k}" if v is not None else "" for k, v in enumerate(node.inputs)]
    out_names = [f"o{k}" for k in range(len(node.outputs))]
    proto = helper.make_node(node.op_type, in_names, out_names, domain=node.domain)
    defaults = _schema_defaults(node)
    for key, value in node.attrs.items():
        if key in defaults and _same(defaults[key], value):
            continue  # leave spec defaults implicit: evaluators of older versions may not know them
        if isinstance(value, tuple) and not value:
            continue  # an empty list has no attribute type; the spec default applies
        if isinstance(value, np.ndarray):
            proto.attribute.append(helper.make_attribute(key, onnx.numpy_helper.from_array(value)))
        else:
            proto.attribute.append(helper.make_attribute(key, value))
    feeds = {name: v.const for name, v in zip(in_names, node.inputs) if v is not None}
    graph = helper.make_graph(
        [proto], "fold",
        [helper.make_tensor_value_info(n, v.dtype.onnx, v.shape) for n, v in zip(in_names, node.inputs) if v],
        [helper.make_tensor_value_info(n, 0, None) for n in out_names])
    opset = node.opset
    if node.domain == "" and node.op_type in _NEWER_IS_SUPERSET:
        opset = max(opset, _NEWER_IS_SUPERSET[node.op_type])
    opsets = {"": opset} if node.domain == "" else {"": 21, node.domain: node.opset}
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    try:
        ref = ReferenceEvaluator(model)
        outs = ref.run(None, feeds)
    except Exception as e:
        raise ShapeError(f"{node.label}: constant folding failed: {type(e).__name__}: {e}") from e
    return [np.asarray(o) for o in outs]


# Ops whose reference implementation starts at a later version whose semantics contain the
# earlier versions' (only types and attributes were added): evaluated at that version.
# QuantizeLinear / DequantizeLinear 10 and 13 (per-tensor, per-axis int8/uint8) are cases of 19.
_NEWER_IS_SUPERSET = {"QuantizeLinear": 19, "DequantizeLinear": 19}


def _schema_defaults(node: Node) -> dict:
    schema = registry.schema_for(node.op_type, node.opset, node.domain)
    return {} if schema is None else registry.schema_defaults(schema)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and np.array_equal(a, b)
    return type(a) is type(b) and a == b
