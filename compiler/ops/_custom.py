"""Operators from custom-op libraries (ABI of templates/c/onnxc_custom_op.h).

Each described operator becomes an OpDef registered for one compile: types and ranks
come from its description, dims from its ``shape`` function at run time, the work from
its ``compute`` function, both reached through the context's custom-op table.
"""
from __future__ import annotations

import json

import numpy as np

from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from .registry import MAX_OPSET, OpDef


def _json_value(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (tuple, list)):
        return [_json_value(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return str(v)


def make_custom_op(desc, index: int) -> type[OpDef]:
    """An OpDef class for one description; ``index`` is its slot in the context's table."""

    class CustomOp(OpDef):
        foldable = False
        description = desc
        slot = index

        def _check(self, node):
            if len(node.inputs) != desc.num_inputs or len(node.outputs) != desc.num_outputs:
                raise ShapeError(f"{node.label}: the custom op takes {desc.num_inputs} inputs and gives "
                                 f"{desc.num_outputs} outputs")
            if any(v is None or not v.is_tensor for v in node.inputs):
                raise ShapeError(f"{node.label}: every input of a custom op must be a tensor")

        def infer(self, node, ctx):
            self._check(node)
            out = []
            for i, (t, r) in enumerate(zip(desc.output_types, desc.output_ranks)):
                dtype = dt.from_onnx(t) if t >= 0 else node.inputs[-1 - t].dtype
                rank = r if r >= 0 else node.inputs[-1 - r].rank
                key = ("dims", i, rank)
                dims = node.memo.get(key)
                if dims is None or any(d not in ctx.dims for d in dims):
                    dims = tuple(ctx.dims.data(f"{node.label} output {i}") for _ in range(rank))
                    node.memo[key] = dims
                out.append((dtype, dims))
            return out

        def lower(self, node, k):
            attrs = {key: _json_value(v) for key, v in node.attrs.items()}
            data = {"inputs": [{"name": t.name, "type": t.dtype.onnx, "dims": t.data()["dims"]} for t in k.inputs],
                    "outputs": [{"name": t.name, "type": t.dtype.onnx, "dims": t.data()["dims"],
                                 "ptrs": [k.data_dim_ptr(d) for d in t.dims]} for t in k.outputs],
                    "slot": index, "attrs": c_string(json.dumps(attrs, sort_keys=True), None),
                    "label": c_string(f"{desc.domain}::{desc.name}")}
            kernel = k.kernel("c/custom_op.c.j2", ("c/helpers/custom_op.c.j2",), shape=False, **data)
            kernel.shape_template = "c/custom_op.c.j2"
            kernel.shape_data = data | {"shape": True}
            return kernel

    CustomOp.__name__ = f"Custom_{desc.name}"
    return CustomOp


def registrations(descs) -> dict:
    """registry.extra_ops entries for the descriptions, in their table order."""
    out: dict = {}
    for i, d in enumerate(descs):
        out.setdefault((d.domain, d.name), []).append((max(d.since, 1), MAX_OPSET, make_custom_op(d, i)))
    return out
