"""Internal ops that optimization passes create (domain ``onnxc``): a node of a model never
names them. Each writes itself back as standard ONNX nodes when the optimized graph is
exported (SessionOptions.optimized_model_filepath), so onnxruntime can load that file.

Activations fused into a kernel's epilogue (c/helpers/sgemm.c.j2) are described by
``activation`` (the ONNX op name) and ``activation_params`` (its float attributes).
"""
from __future__ import annotations

import math
from typing import Optional

from onnx import helper

from ...codegen.literals import float_literal
from ..ir import Node

DOMAIN = "onnxc"

# ONNX op -> (epilogue activation, names of its float params in order, their defaults)
ACTIVATIONS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "Relu": ("ONNXC_ACT_RELU", (), ()),
    "Clip": ("ONNXC_ACT_CLIP", ("min", "max"), (-math.inf, math.inf)),
    "LeakyRelu": ("ONNXC_ACT_LEAKY_RELU", ("alpha",), (0.01,)),
    "Sigmoid": ("ONNXC_ACT_SIGMOID", (), ()),
    "HardSigmoid": ("ONNXC_ACT_HARD_SIGMOID", ("alpha", "beta"), (0.2, 0.5)),
    # x * HardSigmoid(x) with HardSwish's fixed alpha and beta (the op has no attributes)
    "HardSwish": ("ONNXC_ACT_HARD_SWISH", ("alpha", "beta"), (1 / 6, 0.5)),
    "Tanh": ("ONNXC_ACT_TANH", (), ()),
    "Swish": ("ONNXC_ACT_SILU", (), ()),   # x * Sigmoid(x), matched from its two nodes
}


def epilogue_act(node: Node) -> dict[str, str]:
    """The epilogue fields of a fused node's activation: act, alpha, beta (C literals)."""
    name = node.attrs.get("activation", "")
    if not name:
        return {"act": "ONNXC_ACT_NONE", "alpha": "0.0f", "beta": "0.0f"}
    act, _, _ = ACTIVATIONS[name]
    params = list(node.attrs.get("activation_params", ())) + [0.0, 0.0]
    return {"act": act, "alpha": float_literal(params[0], "float"), "beta": float_literal(params[1], "float")}


def activation_nodes(node: Node, x: str, y: str) -> list:
    """The activation of a fused node as standard ONNX nodes from ``x`` to ``y`` (export)."""
    name = node.attrs.get("activation", "")
    params = node.attrs.get("activation_params", ())
    prefix = f"{node.name}_{name}"
    if name == "Clip":
        lo, hi = (helper.make_tensor(f"{prefix}_{k}", 1, [], [v]) for k, v in zip(("min", "max"), params))
        return [helper.make_node("Constant", [], [f"{prefix}_min"], value=lo),
                helper.make_node("Constant", [], [f"{prefix}_max"], value=hi),
                helper.make_node("Clip", [x, f"{prefix}_min", f"{prefix}_max"], [y])]
    if name == "Swish":
        return [helper.make_node("Sigmoid", [x], [f"{prefix}_sigmoid"]),
                helper.make_node("Mul", [x, f"{prefix}_sigmoid"], [y])]
    if name == "HardSwish":
        return [helper.make_node(name, [x], [y])]
    _, names, _ = ACTIVATIONS[name]
    return [helper.make_node(name, [x], [y], **dict(zip(names, params)))]


def activation_of(node: Node, const_input) -> Optional[tuple[str, tuple[float, ...]]]:
    """If ``node`` is an activation an epilogue computes: its name and float params.
    const_input(i) gives input i's constant value or None."""
    if node.domain != "" or node.op_type not in ACTIVATIONS or node.op_type == "Swish":
        return None
    _, names, defaults = ACTIVATIONS[node.op_type]
    if node.op_type == "Clip":
        if node.opset < 11:
            return "Clip", (float(node.attrs.get("min", -math.inf)), float(node.attrs.get("max", math.inf)))
        bounds = []
        for i, default in ((1, -math.inf), (2, math.inf)):
            if node.input(i) is None:
                bounds.append(default)
                continue
            value = const_input(i)
            if value is None or value.size != 1:
                return None
            bounds.append(float(value.reshape(-1)[0]))
        return "Clip", tuple(bounds)
    return node.op_type, tuple(float(node.attrs.get(n, d)) for n, d in zip(names, defaults))
