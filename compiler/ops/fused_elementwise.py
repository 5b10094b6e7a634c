"""FusedElementwise: a tree of float32 elementwise ops computed in one loop nest.

The ``fuse_elementwise`` pass makes it from nodes whose intermediate results each have one
reader: GELU written out as Div, Erf, Add, Mul, Mul becomes one pass over the tensor instead
of five, with no intermediate tensors in the arena. The node keeps the ops it replaced in
``memo["steps"]``: (original node, operands), an operand being ("input", i) for the fused
node's i-th input or ("step", j) for the result of step j. The last step is the output.
"""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext, TensorRef
from .. import dtypes as dt
from ..ir import Node
from . import _fused
from ._binary import Broadcasting
from ._elementwise import Binary, Elementwise, Unary, Variadic, elementwise_kernel
from .pow import small_power
from .registry import InferContext, register

# Broadcasting ops whose float32 kernel is their scalar expression (others check or convert).
ARITHMETIC = ("Add", "Sub", "Mul", "Div")


def fusable(node: Node) -> bool:
    """Whether a node is a standard elementwise op on float32 tensors whose kernel is exactly
    its scalar expression over broadcast operands (so it can be inlined into another's)."""
    impl = node.impl
    if node.domain or impl is None or node.subgraphs or len(node.outputs) != 1:
        return False
    cls = type(impl)
    if isinstance(impl, Broadcasting):
        # (numpy broadcasting from version 7; Pow by a constant 2 or 3 is a product)
        plain = node.version > 6 and (node.op_type in ARITHMETIC or (node.op_type == "Pow" and small_power(node) > 0))
    else:
        plain = any(isinstance(impl, base) and cls.lower is base.lower for base in (Unary, Binary, Variadic))
    values = [*node.inputs, node.outputs[0]]
    return plain and all(v is not None and v.is_tensor and v.dtype is dt.FLOAT for v in values)


def scalar(step: Node, args: list[str], t: TensorRef) -> str:
    """The C expression of one original op over operand expressions ``args``."""
    impl = step.impl
    if isinstance(impl, Unary):
        return impl.scalar(args[0], step, t)
    if isinstance(impl, Binary):
        return impl.scalar(args[0], args[1], step, t)
    acc = args[0]
    for a in args[1:]:
        acc = impl.combine(acc, a, t)
    return impl.finish(acc, len(args), t)


@register("FusedElementwise", since=1, domain=_fused.DOMAIN)
class FusedElementwise(Elementwise):
    """Y = the composition of the elementwise ops in memo["steps"], one loop nest, with numpy
    broadcasting of every input to Y. Attribute ``ops``: the fused op types, for readers."""

    def infer(self, node: Node, ctx: InferContext):
        return [(dt.FLOAT, node.memo["shape"])]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        operands = [k.input(i) for i in range(len(node.inputs))]
        steps = node.memo["steps"]

        def value(names: list[str]) -> str:
            results: list[str] = []
            for step, refs in steps:
                args = [names[i] if kind == "input" else results[i] for kind, i in refs]
                results.append(f"({scalar(step, args, k.out)})")
            return results[-1]
        return elementwise_kernel(k, operands, value)

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """The original nodes, with their original intermediate names."""
        from ..export import node_proto
        protos = []
        for j, (step, refs) in enumerate(node.memo["steps"]):
            names = [inputs[i] if kind == "input" else node.memo["steps"][i][0].outputs[0].name for kind, i in refs]
            proto = node_proto(step, names)
            if j == len(node.memo["steps"]) - 1:
                proto.output[0] = outputs[0]
            protos.append(proto)
        return protos
