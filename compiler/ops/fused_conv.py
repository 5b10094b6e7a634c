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
    """Y = act(conv(P(X), W) + B + Z), made by the fusion passes from [prologue ->] Conv [-> Add]
    [-> activation]: the bias, the residual Z (same shape as Y) and the activation are applied to
    each output tile right after the GEMM computed it. Attributes: Conv's, plus ``activation``
    (an ONNX op name, "" for none) and ``activation_params``. A prologue (fuse_conv_prologue:
    a 1x1 Conv only) is P(X) = X * S + T per input channel, inputs 4 and 5 (shape [C, 1, 1]),
    then ReLU where the attribute ``prologue`` is "Relu": applied as the GEMM packs X."""

    def infer(self, node: Node, ctx: InferContext):
        (dtype, shape), = super().infer(node, ctx)
        if dtype is not dt.FLOAT:
            raise ctx.fail("FusedConv computes float32 only")
        if ctx.has(3) and tuple(ctx.inp(3).shape) != tuple(shape):
            raise ctx.fail(f"the residual Z must have Y's shape {list(shape)}, got {list(ctx.inp(3).shape)}")
        if ctx.has(4) or ctx.has(5):
            c = ctx.inp(0).shape[1]
            for i in (4, 5):
                if not ctx.has(i) or ctx.inp(i).dtype is not dt.FLOAT \
                        or tuple(ctx.inp(i).shape) != (c, 1, 1):
                    raise ctx.fail(f"a prologue takes a float32 scale and shift of shape [{c}, 1, 1] (inputs 4, 5)")
        return [(dtype, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        epilogue = _fused.epilogue_act(node) | {"residual": k.input(3).name if k.has_input(3) else None}
        if k.has_input(4):
            epilogue["prologue"] = {"scale": k.input(4).name, "shift": k.input(5).name,
                                    "relu": node.attrs.get("prologue", "") == "Relu"}
        return conv_kernel(node, k, epilogue=epilogue, **self.conv_args(node, k))

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """[Mul by S, Add of T, Relu,] Conv, then Add of Z, then the activation, as standard ONNX nodes."""
        attrs = {a: v for a, v in node.attrs.items() if a not in ("activation", "activation_params", "prologue")}
        conv_inputs = [i for i in inputs[:3]]
        while conv_inputs and conv_inputs[-1] == "":
            conv_inputs.pop()
        nodes = []
        if len(inputs) > 5 and inputs[4]:
            pre = [node.name + "_prologue_mul", node.name + "_prologue_add"]
            nodes += [helper.make_node("Mul", [inputs[0], inputs[4]], [pre[0]]),
                      helper.make_node("Add", [pre[0], inputs[5]], [pre[1]])]
            if node.attrs.get("prologue") == "Relu":
                pre.append(node.name + "_prologue_relu")
                nodes.append(helper.make_node("Relu", [pre[1]], [pre[2]]))
            conv_inputs[0] = pre[-1]
        steps = [node.name + "_conv"]
        nodes += [helper.make_node("Conv", conv_inputs, [steps[-1]], name=node.name or None, **_listed(attrs))]
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
