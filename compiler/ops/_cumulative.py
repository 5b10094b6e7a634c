"""Shared machinery of CumSum and CumProd (the ``c/cumulative.c.j2`` family).

The axis is a tensor input: a constant one is resolved when compiling, a runtime
one is read by the kernel, which then splits the dims around it.
"""
from __future__ import annotations

from typing import ClassVar

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from ._reduce import check_type, normalize_axis, split_at, unsigned, wrap
from .registry import InferContext, OpDef

CUMULATIVE_TYPES = (dt.UINT32, dt.UINT64, dt.INT32, dt.INT64) + dt.FLOATS


class Cumulative(OpDef):
    """Base: y[k] = y[k-1] (op) x[k] along axis (exclusive: x[k-1]; reverse: from the end)."""
    op: ClassVar[str] = "+"
    identity: ClassVar[str] = "0"

    def infer(self, node: Node, ctx: InferContext):
        x, axis = ctx.inp(0), ctx.inp(1)
        check_type(ctx, x.dtype, CUMULATIVE_TYPES)
        check_type(ctx, axis.dtype, (dt.INT32, dt.INT64), "axis")
        if len(axis.shape) > 1 or (len(axis.shape) == 1 and axis.shape[0] != 1):
            raise ctx.fail("axis must be a scalar")
        if len(x.shape) == 0:
            raise ctx.fail("input must have rank >= 1")
        value = ctx.const(1)
        if value is not None:
            normalize_axis(ctx, int(value.reshape(-1)[0]), len(x.shape))
        return [(x.dtype, x.shape)]

    def combine(self, a: str, b: str, t: TensorRef) -> str:
        if t.dtype.is_float:
            return f"{a} {self.op} {b}"
        u = unsigned(t.dtype)
        return wrap(t.dtype, f"({u}){a} {self.op} ({u}){b}")

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, axis, y = k.input(0), k.input(1), k.out
        data = {"reverse": int(node.attrs.get("reverse", 0)), "exclusive": int(node.attrs.get("exclusive", 0)),
                "output": y.name, "axis": axis.name, "rank": x.rank, "dims": [cexpr.lit(d) for d in x.dims],
                "err_axis": c_string(f"{node.op_type}: axis out of range"),
                "load_x": x.load("{}"), "load_y": y.load("{}"),
                "start": y.store(self.identity if node.attrs.get("exclusive", 0) else x.load("{}")),
                "combine": y.store(self.combine("{a}", "{b}", x))}
        if axis.value is not None:
            outer, n, inner = split_at(x.dims, int(axis.value.reshape(-1)[0]) % x.rank)
            data |= {"runtime": False, "outer": cexpr.lit(outer), "n": cexpr.lit(n), "inner": cexpr.lit(inner),
                     "may_be_empty": not (isinstance(n, int) and n > 0)}
        else:
            data |= {"runtime": True, "outer": "outer", "n": "n", "inner": "inner", "may_be_empty": True}
        return k.kernel("c/cumulative.c.j2", **data)
