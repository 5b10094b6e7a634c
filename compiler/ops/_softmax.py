"""Shared machinery of Softmax, LogSoftmax and Hardmax (the ``c/softmax.c.j2`` family).

Each normalizes the slices [outer, n, inner] of its input along n. Before
opset 13 the input is coerced to 2-D at ``axis`` (n covers every axis from
``axis`` on); from opset 13 n is the single axis ``axis``.

Softmax of bfloat16 computes as ONNX's reference computes its function body (ReduceMax, Sub,
Exp, ReduceSum, Div, each result a bfloat16 tensor): x - max, its exp, the quotient and the
row's running sum, added in index order, are each rounded to bfloat16, as the Attention kernel
does (onnxruntime has no bfloat16 Softmax to follow). The other types, float16 included, and
LogSoftmax compute in float (or double) and round once, at the end, as onnxruntime does.
"""
from __future__ import annotations

from typing import ClassVar

from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from ._quantize import ROUND_HELPER, round_to
from ._reduce import check_type, normalize_axis, split_at
from .registry import InferContext, OpDef


class SoftmaxFamily(OpDef):
    """Base: ``mode`` is "softmax", "log_softmax" or "hardmax"."""
    mode: ClassVar[str] = ""
    coerce_2d: ClassVar[bool] = False

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, dt.FLOATS)
        rank = len(x.shape)
        if rank == 0:
            raise ctx.fail("input must have rank >= 1")
        normalize_axis(ctx, self.axis(node), rank)
        return [(x.dtype, x.shape)]

    def axis(self, node: Node) -> int:
        return node.attrs.get("axis", 1 if self.coerce_2d else -1)

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        axis = self.axis(node) % x.rank
        outer, n, inner = split_at(x.dims, axis, x.rank if self.coerce_2d else None)
        c = x.compute
        step = "k" if inner == 1 else f"k * {cexpr.lit(inner)}"
        by_steps = self.mode == "softmax" and x.dtype is dt.BFLOAT16
        return k.kernel("c/softmax.c.j2", helpers=(ROUND_HELPER,) if by_steps else (),
                        mode=self.mode, compute=c, output=y.name,
                        round=round_to("{}", x.dtype) if by_steps else None, load_y=y.load("{}"),
                        outer=cexpr.lit(outer), n=cexpr.lit(n), inner=cexpr.lit(inner),
                        block=cexpr.lit(cexpr.mul(n, inner)), at=f"base + {step}",
                        load=x.load("{}"), store=y.store("{}"), in_place=c == y.ctype,
                        exp=math_fn("exp", c), log=math_fn("log", c), x_name=x.name,
                        lanes=self.mode != "hardmax" and inner == 1 and x.dtype is dt.FLOAT and y.dtype is dt.FLOAT)
