"""Shared machinery of elementwise ops: broadcasting inference and the
``c/elementwise.c.j2`` kernel family. Op modules subclass :class:`Unary`,
:class:`Binary` or :class:`Variadic` and give a scalar C expression."""
from __future__ import annotations

from typing import Callable, ClassVar, Sequence

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from .. import dtypes as dt
from ..dims import broadcast_shapes
from ..ir import Node
from .registry import InferContext, OpDef


def check_dtype(ctx: InferContext, dtype: dt.DType, allowed: Sequence[dt.DType], what: str = "input") -> None:
    if dtype not in allowed:
        raise ctx.fail(f"{what} type {dtype} is not allowed (expects one of {', '.join(map(str, allowed))})")


def broadcast_strides(t: TensorRef, out: TensorRef) -> list[cexpr.CExpr]:
    """Strides of ``t`` over the output's axes: 0 where ``t`` is broadcast."""
    pad = out.rank - t.rank
    own = t.strides
    result: list[cexpr.CExpr] = []
    for axis in range(out.rank):
        if axis < pad:
            result.append(0)
            continue
        d, s = t.dims[axis - pad], own[axis - pad]
        od = out.dims[axis]
        if d == 1:
            result.append(0)
        elif d == od:
            result.append(s)
        else:  # symbolic: broadcast decided at run time
            result.append(f"({d} == 1 ? 0 : {cexpr.lit(s)})")
    return result


def _coalesce(dims: list, strides: list[list]) -> tuple[list, list[list]]:
    """Merge adjacent axes that every operand walks contiguously (static dims only)."""
    out_dims, out_strides = [dims[0]], [[s[0]] for s in strides]
    for axis in range(1, len(dims)):
        d = dims[axis]
        prev = out_dims[-1]
        mergeable = isinstance(d, int) and isinstance(prev, int) and all(
            isinstance(s[axis], int) and isinstance(cur[-1], int) and cur[-1] == s[axis] * d
            for s, cur in zip(strides, out_strides))
        if mergeable:
            out_dims[-1] = prev * d
            for s, cur in zip(strides, out_strides):
                cur[-1] = s[axis]
        else:
            out_dims.append(d)
            for s, cur in zip(strides, out_strides):
                cur.append(s[axis])
    return out_dims, out_strides


# The shortest row (last axis after merging) a broadcasting map splits between threads.
ROW_MIN = 64


def elementwise_kernel(k: KernelContext, operands: list[TensorRef],
                       scalar: Callable[[list[str]], str], out: TensorRef | None = None) -> Kernel:
    """Y[i] = scalar(operands[i]) with numpy broadcasting of every operand to Y."""
    out = out or k.out
    names = [f"v_{t.name}" for t in operands]
    value = out.store(scalar(names))
    flat = all(t.dims == out.dims or t.numel == 1 for t in operands)
    if flat or out.rank == 0:
        loads = [{"var": n, "compute": t.compute, "expr": t.load("0" if t.numel == 1 and out.numel != 1 else "i")}
                 for n, t in zip(names, operands)]
        # Elements are independent unless the value calls into the context (string results).
        return k.kernel("c/elementwise.c.j2", flat=True, n=cexpr.lit(out.numel), loads=loads,
                        out=out.name, value=value, parallel="ctx" not in value)
    strides = [broadcast_strides(t, out) for t in operands]
    dims, strides = _coalesce(list(out.dims), strides)
    loads = [{"var": n, "compute": t.compute, "expr": t.load(f"off_{t.name}"), "offset": f"off_{t.name}",
              "terms": [f"i{a} * {cexpr.lit(s)}" if s != 1 else f"i{a}" for a, s in enumerate(st) if s != 0]}
             for n, t, st in zip(names, operands, strides)]
    # Threads split the rows (all axes but the last) when a row is long enough to pay for
    # finding its indices: a channel's map scaled by a squeeze-and-excitation, for one.
    parallel = "ctx" not in value and len(dims) >= 2 and isinstance(dims[-1], int) and dims[-1] >= ROW_MIN
    rows = cexpr.lit(cexpr.prod(dims[:-1])) if parallel else 0
    return k.kernel("c/elementwise.c.j2", flat=False, dims=[cexpr.lit(d) for d in dims], loads=loads,
                    out=out.name, value=value, parallel=parallel, rows=rows, n=cexpr.lit(out.numel))


# Types stored one element per whole bytes (not strings, not packed 4-bit or 2-bit elements).
WHOLE_BYTE_TYPES = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16, dt.BFLOAT16, dt.INT8, dt.INT16, dt.INT32, dt.INT64,
                    dt.UINT8, dt.UINT16, dt.UINT32, dt.UINT64, dt.BOOL)


def same_index_inputs(node: Node) -> list[int]:
    """Inputs of an elementwise node with the output's type and shape: element i of one is
    read only for element i of the output, so the output may be written over it."""
    out = node.outputs[0] if len(node.outputs) == 1 else None
    if out is None or out.dtype not in WHOLE_BYTE_TYPES or not out.static:
        return []
    return [i for i, v in enumerate(node.inputs)
            if v is not None and v.is_tensor and v.dtype == out.dtype and v.shape == out.shape]


class Elementwise(OpDef):
    """Base of the elementwise ops: the output may be written over a same-typed, same-shaped
    input that dies at the node."""

    def in_place(self, node: Node) -> list[int]:
        return same_index_inputs(node)


class Unary(Elementwise):
    """y = f(x), same shape and type."""
    types: ClassVar[Sequence[dt.DType]] = dt.NUMERIC

    def out_dtype(self, x: dt.DType) -> dt.DType:
        return x

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, self.types)
        return [(self.out_dtype(x.dtype), x.shape)]

    def scalar(self, x: str, node: Node, t: TensorRef) -> str:
        raise NotImplementedError

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        return elementwise_kernel(k, [x], lambda v: self.scalar(v[0], node, x))


class Binary(Elementwise):
    """c = f(a, b) with multidirectional broadcasting."""
    types: ClassVar[Sequence[dt.DType]] = dt.NUMERIC

    def out_dtype(self, a: dt.DType) -> dt.DType:
        return a

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, a.dtype, self.types)
        self.check_pair(ctx, a.dtype, b.dtype)
        return [(self.out_dtype(a.dtype), broadcast_shapes(ctx.dims, a.shape, b.shape))]

    def check_pair(self, ctx: InferContext, a: dt.DType, b: dt.DType) -> None:
        if a != b:
            raise ctx.fail(f"input types differ: {a} and {b}")

    def scalar(self, a: str, b: str, node: Node, t: TensorRef) -> str:
        raise NotImplementedError

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b = k.input(0), k.input(1)
        return elementwise_kernel(k, [a, b], lambda v: self.scalar(v[0], v[1], node, a))


class Variadic(Elementwise):
    """y = f(x0, x1, ...) folded left to right, with broadcasting (Sum, Max, Min, Mean)."""
    types: ClassVar[Sequence[dt.DType]] = dt.NUMERIC

    def infer(self, node: Node, ctx: InferContext):
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        for x in xs:
            check_dtype(ctx, x.dtype, self.types)
            if x.dtype != xs[0].dtype:
                raise ctx.fail(f"input types differ: {xs[0].dtype} and {x.dtype}")
        return [(xs[0].dtype, broadcast_shapes(ctx.dims, *[x.shape for x in xs]))]

    def combine(self, acc: str, x: str, t: TensorRef) -> str:
        raise NotImplementedError

    def finish(self, acc: str, count: int, t: TensorRef) -> str:
        return acc

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        xs = [k.input(i) for i in range(len(node.inputs))]

        def scalar(vals: list[str]) -> str:
            acc = vals[0]
            for v in vals[1:]:
                acc = self.combine(acc, v, xs[0])
            return self.finish(acc, len(vals), xs[0])
        return elementwise_kernel(k, xs, scalar)
