from __future__ import annotations

from onnx import helper

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _fused
from .conv import Conv, conv_kernel
from .registry import InferContext, register


@register("FusedConv", since=1, domain=_fused.DOMAIN)
class FusedConv(Conv):
    """Y = act(conv(X, W) + B + Z), made by the fusion pass from Conv [-> Add] [-> activation]:
    the bias, the residual Z (same shape as Y) and the activation are applied to each output
    tile right after the GEMM computed it. Attributes: Conv's, plus ``activation`` (an ONNX op
    name, "" for none) and ``activation_params``."""

    def infer(self, node: Node, ctx: InferContext):
        (dtype, shape), = super().infer(node, ctx)
        if dtype is not dt.FLOAT:
            raise ctx.fail("FusedConv computes float32 only")
        if ctx.has(3) and tuple(ctx.inp(3).shape) != tuple(shape):
            raise ctx.fail(f"the residual Z must have Y's shape {list(shape)}, got {list(ctx.inp(3).shape)}")
        return [(dtype, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        epilogue = _fused.epilogue_act(node) | {"residual": k.input(3).name if k.has_input(3) else None}
        return conv_kernel(node, k, epilogue=epilogue, **self.conv_args(node, k))

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """Conv, then Add of Z, then the activation, as standard ONNX nodes."""
        attrs = {a: v for a, v in node.attrs.items() if a not in ("activation", "activation_params")}
        conv_inputs = [i for i in inputs[:3]]
        while conv_inputs and conv_inputs[-1] == "":
            conv_inputs.pop()
        steps = [node.name + "_conv"]
        nodes = [helper.make_node("Conv", conv_inputs, [steps[-1]], name=node.name or None, **_listed(attrs))]
        if len(inputs) > 3 and inputs[3]:
            steps.append(node.name + "_add")
            nodes.append(helper.make_node("Add", [steps[-2], inputs[3]], [steps[-1]]))
        if node.attrs.get("activation"):
            nodes += _fused.activation_nodes(node, steps[-1], outputs[0])
        else:
            nodes.append(helper.make_node("Identity", [steps[-1]], [outputs[0]]))
        return nodes


def _listed(attrs: dict) -> dict:
    return {a: list(v) if isinstance(v, tuple) else v for a, v in attrs.items()}
