"""Shared machinery of reductions (Reduce*, ArgMax/ArgMin, MeanVarianceNormalization).

A reduction walks its input once per pass in memory order: a nest of loops
over the input dims where each loop also advances the output offset by its
output stride (0 for a reduced axis). With axes known when compiling, adjacent
axes of the same kind are merged; with axes read at run time (the ``axes``
input of a graph), every axis keeps its own loop and the strides are computed
by the kernel (``c/reduce_axes.j2``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from .registry import InferContext, OpDef

# ---- constants per element type -------------------------------------------------

_INT_LIMITS = {
    dt.INT8: ("INT8_MIN", "INT8_MAX"), dt.INT16: ("INT16_MIN", "INT16_MAX"),
    dt.INT32: ("INT32_MIN", "INT32_MAX"), dt.INT64: ("INT64_MIN", "INT64_MAX"),
    dt.UINT8: ("0", "UINT8_MAX"), dt.UINT16: ("0", "UINT16_MAX"),
    dt.UINT32: ("0", "UINT32_MAX"), dt.UINT64: ("0", "UINT64_MAX"),
    dt.BOOL: ("0", "1"),
}


def lowest(t: dt.DType) -> str:
    """C literal of the smallest value of ``t`` (-inf for floats)."""
    return "-INFINITY" if t.is_float else _INT_LIMITS[t][0]


def highest(t: dt.DType) -> str:
    """C literal of the largest value of ``t`` (+inf for floats)."""
    return "INFINITY" if t.is_float else _INT_LIMITS[t][1]


def unsigned(t: dt.DType) -> str:
    """The unsigned C type integer arithmetic of ``t`` wraps in (no signed overflow)."""
    return t.c_type if t.kind == "uint" else "u" + t.c_type


def wrap(t: dt.DType, expr: str) -> str:
    """``expr`` (unsigned arithmetic) converted back to ``t``."""
    return expr if t.kind == "uint" else f"({t.c_type})({expr})"


def saturate_to_int(expr: str, t: dt.DType) -> str:
    """A non-negative double ``expr`` truncated to integer type ``t``, clamped to its maximum."""
    bits = t.itemsize * 8 - (0 if t.kind == "uint" else 1)
    return f"({expr} >= {float(2 ** bits)!r} ? {highest(t)} : ({t.c_type})({expr}))"


def normalize_axis(ctx: InferContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def check_type(ctx: InferContext, dtype: dt.DType, allowed: Sequence[dt.DType], what: str = "input") -> None:
    if dtype not in allowed:
        raise ctx.fail(f"{what} type {dtype} is not allowed (expects one of {', '.join(map(str, allowed))})")


def split_at(dims: Sequence[cexpr.CExpr], axis: int, end: Optional[int] = None) -> tuple:
    """(outer, n, inner) element counts of ``dims`` around ``dims[axis:end]`` (C expressions)."""
    end = axis + 1 if end is None else end
    return cexpr.prod(dims[:axis]), cexpr.prod(dims[axis:end]), cexpr.prod(dims[end:])


# ---- axes -----------------------------------------------------------------------

def static_axes(ctx: InferContext, axes, rank: int) -> list[int]:
    """Sorted, normalized axes; duplicates are an error as in numpy."""
    out = [normalize_axis(ctx, int(a), rank, "axes entry") for a in axes]
    if len(set(out)) != len(out):
        raise ctx.fail(f"axes {list(axes)} name an axis twice")
    return sorted(out)


@dataclass
class AxesInfo:
    """What a reduction knows about its axes when compiling."""
    axes: Optional[list[int]]      # normalized reduced axes, None when read at run time
    length: cexpr.CExpr = 0        # number of runtime axes (a dim)
    noop: bool = False             # noop_with_empty_axes


def node_axes(node: Node, ctx: InferContext, rank: int) -> AxesInfo:
    """Axes from the attribute (older opsets) or the optional ``axes`` input."""
    noop = bool(node.attrs.get("noop_with_empty_axes", 0))
    if "axes" in node.attrs:
        values = node.attrs["axes"]
    elif ctx.has(1):
        axes = ctx.inp(1)
        if axes.dtype != dt.INT64 or len(axes.shape) != 1:
            raise ctx.fail("axes must be a 1-D int64 tensor")
        values = ctx.const(1)
        if values is None and axes.shape[0] != 0:
            return AxesInfo(None, axes.shape[0], noop)
        values = [] if values is None else values.reshape(-1).tolist()
    else:
        values = []
    if rank == 0:
        # A scalar reduces over its single element whatever the axes say.
        return AxesInfo([], 0, noop)
    if not values:
        return AxesInfo([] if noop else list(range(rank)), 0, noop)
    return AxesInfo(static_axes(ctx, values, rank), 0, noop)


def reduced_shape(ctx: InferContext, node: Node, shape: tuple, info: AxesInfo, keepdims: bool) -> tuple:
    """Output shape; with runtime axes the dims that may change are data dims."""
    if info.axes is not None:
        if keepdims:
            return tuple(1 if a in info.axes else d for a, d in enumerate(shape))
        return tuple(d for a, d in enumerate(shape) if a not in info.axes)
    origin = node.name or node.op_type
    if keepdims:
        return tuple(1 if d == 1 else ctx.dims.data(origin) for d in shape)
    if not isinstance(info.length, int):
        raise UnsupportedError(f"{node.label}: keepdims=0 with axes computed at run time in a tensor of "
                               "unknown length: the output rank is unknown (make axes a constant or keepdims=1)")
    if info.length > len(shape):
        raise ctx.fail(f"{info.length} axes for a rank-{len(shape)} input")
    return tuple(ctx.dims.data(origin) for _ in range(len(shape) - info.length))


# ---- loop plans -----------------------------------------------------------------

@dataclass
class Plan:
    """Loops over a contiguous input in memory order and their output strides."""
    dims: list                   # loop extents (C expressions), outer to inner
    ostrides: list               # output stride per loop, 0 for a reduced loop
    count: cexpr.CExpr           # elements reduced into one output element
    out_numel: cexpr.CExpr
    runtime: Optional[dict] = None   # template data of c/reduce_axes.j2 when axes are read at run time

    @property
    def inner_reduced(self) -> bool:
        return self.runtime is None and self.ostrides[-1] == 0

    def offset(self, loops: int) -> str:
        """C expression of the output offset from the indices of the first ``loops`` loops."""
        terms = [f"i{a}" if s == 1 else f"i{a} * {cexpr.lit(s)}"
                 for a, s in enumerate(self.ostrides[:loops]) if s != 0]
        return " + ".join(terms) or "0"

    def data(self) -> dict:
        return {"dims": [cexpr.lit(d) for d in self.dims], "o_all": self.offset(len(self.dims)),
                "o_outer": self.offset(len(self.dims) - 1), "runtime": self.runtime}


def static_plan(in_dims: Sequence[cexpr.CExpr], axes: Sequence[int]) -> Plan:
    """Merge adjacent axes of the same kind; drop axes of extent 1."""
    groups: list[list] = []       # [extent, reduced]
    for a, d in enumerate(in_dims):
        if d == 1:
            continue
        red = a in axes
        if groups and groups[-1][1] == red:
            groups[-1][0] = cexpr.mul(groups[-1][0], d)
        else:
            groups.append([d, red])
    if not groups:
        groups = [[1, True]]
    kept = [d for d, red in groups if not red]
    kept_strides = iter(cexpr.strides(kept))
    ostrides = [0 if red else next(kept_strides) for _, red in groups]
    count = cexpr.prod(d for d, red in groups if red)
    return Plan([d for d, _ in groups], ostrides, count, cexpr.prod(kept))


def runtime_plan(op: str, x: TensorRef, axes: TensorRef, length: cexpr.CExpr, noop: bool,
                 out_numel: cexpr.CExpr) -> Plan:
    """Every axis is a loop; ``ostride[a]`` and ``count`` come from the axes values at run time."""
    rank = x.rank
    runtime = {"op": op, "axes": axes.name, "length": cexpr.lit(length), "rank": rank,
               "dims": [cexpr.lit(d) for d in x.dims], "noop": int(noop), "maybe_empty": not isinstance(length, int),
               "err_range": c_string(f"{op}: axis out of range"),
               "err_twice": c_string(f"{op}: axes name an axis twice")}
    return Plan(list(x.dims), [f"ostride[{a}]" for a in range(rank)], "count", out_numel, runtime)


def plan_for(node: Node, k: KernelContext, x: TensorRef, out_numel: cexpr.CExpr) -> Plan:
    """The loop plan of a Reduce-style node (axes attribute or input, noop_with_empty_axes)."""
    noop = bool(node.attrs.get("noop_with_empty_axes", 0))
    if "axes" in node.attrs:
        values = list(node.attrs["axes"])
    elif k.has_input(1) and k.input(1).value is None and k.input(1).dims[0] != 0:
        if x.rank == 0:
            return static_plan([], [])
        return runtime_plan(node.op_type, x, k.input(1), k.input(1).dims[0], noop, out_numel)
    elif k.has_input(1) and k.input(1).value is not None:
        values = k.input(1).value.reshape(-1).tolist()
    else:
        values = []
    if not values:
        axes = [] if noop else list(range(x.rank))
    else:
        axes = sorted(int(a) + x.rank if a < 0 else int(a) for a in values)
    return static_plan(x.dims, axes)


def accumulate(plan: Plan, array: str, ctype: str, x_decl: str, combine: str) -> dict:
    """A pass folding every input element into ``array[o]``.

    ``x_decl`` declares ``x`` from ``i`` (and ``o``); ``combine`` is the new value of the
    accumulator written ``{a}``. When the innermost loop is reduced the accumulator
    stays in a local variable across it.
    """
    if plan.inner_reduced:
        return {"kind": "inputs", "head": [f"{ctype} acc = {array}[o];"],
                "body": [x_decl, f"acc = {combine.format(a='acc')};"], "tail": [f"{array}[o] = acc;"]}
    return {"kind": "inputs", "head": [], "tail": [],
            "body": [x_decl, f"{array}[o] = {combine.format(a=f'{array}[o]')};"]}


def mapping(lines: list[str]) -> dict:
    """A pass writing one output per input element (sees ``i`` and ``o``)."""
    return {"kind": "inputs", "head": [], "body": lines, "tail": []}


def shape_data(node: Node, k: KernelContext, keepdims: bool) -> dict:
    """Data of c/reduce_shape.c.j2: which output dims are data dims and where they come from."""
    x, axes = k.input(0), k.input(1)
    plan = runtime_plan(node.op_type, x, axes, axes.dims[0], bool(node.attrs.get("noop_with_empty_axes", 0)), 0)
    ptrs = {f"out_{d}": a for a, d in enumerate(k.out.dims) if isinstance(d, str)}
    targets = [{"ptr": p, "axis": ptrs[p]} for p in k.data_dims if p in ptrs]
    return {"runtime": plan.runtime, "keepdims": int(keepdims), "targets": targets}


# ---- Reduce* ops ----------------------------------------------------------------

REDUCE_TYPES = (dt.UINT32, dt.UINT64, dt.INT32, dt.INT64) + dt.FLOATS


class Reduce(OpDef):
    """Base of Reduce*: acc = init; acc = combine(acc, x) over the axes; Y = finish(acc)."""
    types: ClassVar[Sequence[dt.DType]] = REDUCE_TYPES

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, self.types)
        info = node_axes(node, ctx, len(x.shape))
        return [(x.dtype, reduced_shape(ctx, node, x.shape, info, bool(node.attrs.get("keepdims", 1))))]

    # -- per-op arithmetic (compute-type values; ``count`` is a C expression) --
    def acc_type(self, t: TensorRef) -> str:
        return t.compute

    def init(self, t: TensorRef) -> str:
        raise NotImplementedError

    def combine(self, acc: str, x: str, t: TensorRef) -> str:
        raise NotImplementedError

    def finish(self, acc: str, count: str, t: TensorRef) -> Optional[str]:
        """The result (compute type) from the accumulator, or None when it is the accumulator."""
        return None

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        body = ReduceBody(plan_for(node, k, x, y.numel), y)
        acc_type = self.acc_type(x)
        acc = body.accumulator("accumulator", acc_type)
        body.init(acc, self.init(x))
        body.add(accumulate(body.plan, acc, acc_type, f"const {x.compute} x = {x.load('i')};",
                            self.combine("{a}", "x", x)))
        result = self.finish(f"{acc}[o]", body.count, x)
        if acc != y.name:
            body.final = f"{y.name}[o] = {y.store(result or f'{acc}[o]')};"
        elif result is not None:
            body.final = f"{y.name}[o] = {result};"
        kernel = body.kernel(k)
        self.attach_shape(node, k, kernel)
        return kernel

    def attach_shape(self, node: Node, k: KernelContext, kernel: Kernel) -> None:
        if k.data_dims:
            kernel.shape_template = "c/reduce_shape.c.j2"
            kernel.shape_data = shape_data(node, k, bool(node.attrs.get("keepdims", 1)))


class ReduceBody:
    """Collects the buffers and passes of a c/reduce.c.j2 kernel."""

    def __init__(self, plan: Plan, out: TensorRef) -> None:
        self.plan, self.out = plan, out
        self.count = "count" if plan.runtime else cexpr.lit(plan.count)
        self.decls: list[dict] = []
        self.scratch: dict[str, cexpr.CExpr] = {}
        self.inits: list[dict] = []
        self.passes: list[dict] = []
        self.final: Optional[str] = None

    def accumulator(self, name: str, ctype: str) -> str:
        """The output itself when it has the accumulator's type, else a scratch array."""
        return self.out.name if ctype == self.out.ctype else self.buffer(name, ctype)

    def buffer(self, name: str, ctype: str) -> str:
        """A scratch array with one ``ctype`` per output element."""
        self.scratch[name] = cexpr.mul(c_sizeof(ctype), self.plan.out_numel)
        self.decls.append({"ctype": ctype, "name": name, "index": len(self.scratch) - 1})
        return name

    def init(self, array: str, value: str) -> None:
        self.inits.append({"array": array, "value": value})

    def add(self, pass_: dict) -> None:
        self.passes.append(pass_)

    def add_outputs(self, lines: list[str]) -> None:
        """A pass over the output elements (sees ``o``)."""
        self.passes.append({"kind": "outputs", "lines": lines})

    def kernel(self, k: KernelContext) -> Kernel:
        text = " ".join([self.final or ""] + [line for p in self.passes for key in ("head", "body", "tail", "lines")
                                               for line in p.get(key, ())])
        runtime = self.plan.runtime and dict(self.plan.runtime, count=bool(re.search(r"\bcount\b", text)))
        consumed = [k.input(1).name] if k.has_input(1) and not runtime else []
        kernel = k.kernel("c/reduce.c.j2", **self.plan.data() | {"runtime": runtime}, consumed=consumed,
                          decls=self.decls, inits=self.inits, out_numel=cexpr.lit(self.plan.out_numel),
                          passes=self.passes, final=self.final)
        kernel.scratch = dict(self.scratch)
        return kernel


_C_SIZES = {d.c_type: d.itemsize for d in dt.ALL}


def c_sizeof(ctype: str) -> int:
    return _C_SIZES[ctype]


# ---- ArgMax / ArgMin --------------------------------------------------------------

ARG_TYPES = dt.NUMERIC


class ArgReduce(OpDef):
    """Base of ArgMax/ArgMin: int64 index of the best element along one axis."""
    # C comparison "v beats best_v" for (float, select_last_index) pairs.
    better_float: ClassVar[tuple[str, str]] = ("", "")
    better_int: ClassVar[tuple[str, str]] = ("", "")

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, ARG_TYPES)
        rank = len(x.shape)
        if rank == 0:
            raise ctx.fail("input must have rank >= 1")
        axis = normalize_axis(ctx, node.attrs.get("axis", 0), rank)
        if x.shape[axis] == 0:
            raise ctx.fail(f"axis {axis} is empty: there is no element to pick")
        keep = bool(node.attrs.get("keepdims", 1))
        shape = tuple(1 if a == axis else d for a, d in enumerate(x.shape) if keep or a != axis)
        return [(dt.INT64, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        axis = node.attrs.get("axis", 0) % x.rank
        outer, n, inner = split_at(x.dims, axis)
        last = int(node.attrs.get("select_last_index", 0))
        better = (self.better_float if x.dtype.is_float else self.better_int)[last]
        return k.kernel("c/arg_reduce.c.j2", reduced=y.name, compute=x.compute,
                        outer=cexpr.lit(outer), n=cexpr.lit(n), inner=cexpr.lit(inner),
                        block=cexpr.lit(cexpr.mul(n, inner)), load=x.load("{}"), better=better,
                        may_be_empty=not isinstance(n, int),
                        err_empty=c_string(f"{node.op_type}: the reduced axis is empty"))
