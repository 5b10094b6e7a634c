"""Shared machinery of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the
``c/loss.c.j2`` kernel over (N, C, D) where D is the product of the trailing dims."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext

REDUCTIONS = ("none", "sum", "mean")


def infer_loss(node: Node, ctx: InferContext, log_softmax: bool) -> list:
    x, target = ctx.inp(0), ctx.inp(1)
    if x.dtype not in dt.FLOATS:
        raise ctx.fail(f"input type {x.dtype} is not a float type")
    if target.dtype not in (dt.INT32, dt.INT64):
        raise ctx.fail(f"target type {target.dtype} is not int32 or int64")
    if len(x.shape) < 2:
        raise ctx.fail(f"input must have rank >= 2, got shape {x.shape}")
    expect = (x.shape[0],) + tuple(x.shape[2:])
    if len(target.shape) != len(expect):
        raise ctx.fail(f"target shape {target.shape} does not match input shape {x.shape}")
    for a, b in zip(target.shape, expect):
        ctx.dims.same(a, b)
    if ctx.has(2):
        w = ctx.inp(2)
        if w.dtype != x.dtype or len(w.shape) != 1:
            raise ctx.fail(f"weight must be a 1-D {x.dtype} tensor")
        ctx.dims.same(w.shape[0], x.shape[1])
    reduction = node.attrs.get("reduction", "mean")
    if reduction not in REDUCTIONS:
        raise ctx.fail(f"reduction {reduction!r} is not one of {', '.join(REDUCTIONS)}")
    out = [(x.dtype, expect if reduction == "none" else ())]
    if log_softmax:
        out.append((x.dtype, x.shape))
    return out


def lower_loss(node: Node, k: KernelContext, log_softmax: bool) -> Kernel:
    x, target, y = k.input(0), k.input(1), k.out
    weight = k.input(2) if k.has_input(2) else None
    log_prob = k.outputs[1] if log_softmax and len(k.outputs) > 1 else None
    expect = [x.dims[0]] + list(x.dims[2:])
    same = list(zip(target.dims, expect))
    if weight is not None:
        same.append((weight.dims[0], x.dims[1]))
    compute = x.compute
    return k.kernel(
        "c/loss.c.j2", op=node.op_type, N=cexpr.lit(x.dims[0]), C=cexpr.lit(x.dims[1]),
        D=cexpr.lit(cexpr.prod(x.dims[2:])), X=x.name, load=x.dtype.load, target=target.name,
        weight=weight.name if weight is not None else None, Y=y.name, store=y.dtype.store,
        log_prob=log_prob.name if log_prob is not None else None, log_softmax=log_softmax,
        reduction=node.attrs.get("reduction", "mean"),
        ignore_index=cexpr.lit(node.attrs["ignore_index"]) if "ignore_index" in node.attrs else None,
        compute=compute, fn="" if compute == "double" else "f",
        checks=[f"{cexpr.lit(a)} != {cexpr.lit(b)}" for a, b in same if a != b])
