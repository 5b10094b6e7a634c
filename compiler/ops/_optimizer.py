"""Shared machinery of the training optimizers of ``ai.onnx.preview.training``
(Adagrad, Adam, Momentum): inputs ``R, T`` then ``groups_in`` groups of ``n``
tensors (X..., G..., state...), outputs ``groups_out`` groups of ``n`` tensors
(X_new..., state_new...). Each optimized tensor is updated independently by the
same element-wise rule; the kernel family is ``c/optimizer.c.j2``.

Arithmetic follows the ONNX reference implementation: the element-wise part runs
in the tensors' type (attributes rounded to it), scalar factors derived from T
(learning-rate decay, bias correction) in double.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import check_dtype
from .registry import InferContext, OpDef

DOMAIN = "ai.onnx.preview.training"
TYPES = (dt.FLOAT, dt.DOUBLE)


def tensor_count(node: Node, groups_in: int) -> int:
    """How many tensors the node optimizes, from its input count."""
    return (len(node.inputs) - 2) // groups_in


class Optimizer(OpDef):
    """Base: checks the variadic layout, types and shapes; subclasses give the template data."""
    groups_in: ClassVar[int] = 3    # X, G and the state tensors
    groups_out: ClassVar[int] = 2   # X_new and the new state tensors
    kind: ClassVar[str] = ""        # which update rule the template renders (adagrad, adam, momentum)

    def infer(self, node: Node, ctx: InferContext):
        extra = len(node.inputs) - 2
        if extra < self.groups_in or extra % self.groups_in:
            raise ctx.fail(f"expects R, T and {self.groups_in} groups of the same number of tensors, "
                           f"got {len(node.inputs)} inputs")
        n = extra // self.groups_in
        if len(node.outputs) != self.groups_out * n:
            raise ctx.fail(f"optimizes {n} tensor(s): expects {self.groups_out * n} outputs, "
                           f"got {len(node.outputs)}")
        r, t = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, r.dtype, TYPES, "R")
        check_dtype(ctx, t.dtype, (dt.INT64,), "T")
        for name, v in (("R", r), ("T", t)):
            if not all(isinstance(d, int) for d in v.shape) or cexpr.prod(v.shape) != 1:
                raise ctx.fail(f"{name} must be a scalar, got shape {list(v.shape)}")
        tensors = [ctx.inp(i) for i in range(2, len(node.inputs))]
        dtype = tensors[0].dtype
        check_dtype(ctx, dtype, TYPES, "X")
        for v in tensors:
            if v.dtype != dtype:
                raise ctx.fail(f"optimized tensors must share one type: {dtype} and {v.dtype}")
        for i in range(n):
            x = tensors[i]
            for g in range(1, self.groups_in):
                other = tensors[g * n + i]
                if len(other.shape) != len(x.shape):
                    raise ctx.fail(f"input {2 + g * n + i} shape {list(other.shape)} differs from "
                                   f"X shape {list(x.shape)}")
                for a, b in zip(x.shape, other.shape):
                    try:
                        ctx.dims.same(a, b)
                    except ShapeError:
                        raise ctx.fail(f"input {2 + g * n + i} shape {list(other.shape)} differs from "
                                       f"X shape {list(x.shape)}") from None
        self.check_attrs(node, ctx)
        # Output group g, tensor i has the type and shape of input group g, tensor i (as in ONNX).
        return [(dtype, tensors[g * n + i].shape) for g in range(self.groups_out) for i in range(n)]

    def check_attrs(self, node: Node, ctx: InferContext) -> None:
        pass

    def scalars(self, node: Node, compute: str) -> dict[str, Any]:
        """Template data for the update rule: C literals of the attributes."""
        raise NotImplementedError

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        n = tensor_count(node, self.groups_in)
        r, t = k.input(0), k.input(1)
        x0 = k.input(2)
        c = x0.compute
        tensors = []
        for i in range(n):
            ins = [k.input(2 + g * n + i) for g in range(self.groups_in)]
            outs = [k.outputs[g * n + i] for g in range(self.groups_out)]
            tensors.append({
                "n": cexpr.lit(ins[0].numel),
                "loads": [t_.load("i") for t_ in ins],
                "outs": [o.name for o in outs],
                "stores": [o.store(f"({c})({{}})") for o in outs],
            })
        data = {"kind": self.kind, "compute": c, "r_compute": r.compute, "r": r.load("0"), "t": t.load("0"),
                "tensors": tensors, "sqrt": math_fn("sqrt", c)}
        data.update(self.scalars(node, c))  # may refine the kind (Momentum's mode)
        return k.kernel("c/optimizer.c.j2", **data)
