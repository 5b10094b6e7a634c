from typing import Optional

from ...codegen import cexpr
from ._indexing import BIG, check_index_type, clamp_big, data_dim, data_dim_ptrs, norm_axes, strided_copy, vector_len
from .registry import OpDef, register


class SliceBase(OpDef):
    """Shared by both Slice versions: a strided copy, planned at compile time when the
    parameters are constants, else by onnxc_slice_plan at run time."""

    def params(self, node, const) -> tuple[Optional[list[int]], ...]:
        """(starts, ends, axes, steps) as ints, None where computed at run time; ``const(i)`` reads input i."""
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        rank = len(x.shape)
        if rank == 0:
            raise ctx.fail("cannot slice a scalar")
        starts, ends, axes, steps = self.params(node, lambda i: _const(ctx.const(i)) if ctx.has(i) else ())
        n = self.num_entries(node, ctx)
        if axes is not None:
            if axes == ():
                axes = list(range(n))
            if len(axes) != n:
                raise ctx.fail(f"axes has {len(axes)} entries, starts has {n}")
            axes = norm_axes(ctx, axes, rank)
        if steps is not None and any(s == 0 for s in steps or ()):
            raise ctx.fail("a step is 0")
        plan = _static_plan(x.shape, starts, ends, axes, steps)
        if plan is None:  # run-time parameters: the sliced dims are data-dependent
            sliced = set(axes) if axes is not None else set(range(rank))
            return [(x.dtype, tuple(data_dim(ctx, node) if a in sliced else d
                                    for a, d in enumerate(x.shape)))]
        out = list(x.shape)
        for a, (start, end, step) in plan.items():
            out[a] = _count(ctx.dims, x.shape[a], start, end, step)
        return [(x.dtype, tuple(out))]

    def num_entries(self, node, ctx) -> int:
        raise NotImplementedError

    def dims_value(self, node, ctx):
        data = ctx.sym_array(0)
        if data is None:
            return None
        starts, ends, axes, steps = self.params(node, lambda i: _const(ctx.const(i)) if ctx.has(i) else ())
        if starts is None or ends is None or axes is None or steps is None:
            return None
        axes = axes or list(range(len(starts)))
        steps = steps or [1] * len(starts)
        index = [slice(None)] * data.ndim
        for start, end, axis, step in zip(starts, ends, axes, steps):
            index[axis % data.ndim] = slice(start, end, step)
        return data[tuple(index)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        starts, ends, axes, steps = self.params(node, lambda i: _const(k.input(i).value) if k.has_input(i) else ())
        if axes == ():
            axes = list(range(len(starts) if starts is not None else k.input(1).dims[0]))
        if axes is not None:
            axes = [a % x.rank for a in axes]
        plan = _static_plan(tuple(x.shape), starts, ends, axes, steps)
        strides = x.strides
        if plan is not None:
            offset, steps_by_axis = 0, [1] * x.rank
            for a, (start, _, step) in plan.items():
                offset = cexpr.add(offset, cexpr.mul(_start_c(x.dims[a], start, step), strides[a]))
                steps_by_axis[a] = step
            return strided_copy(k, x, y.dims, [cexpr.mul(s, st) for s, st in zip(steps_by_axis, strides)], offset)
        plan_data = {"rank": x.rank, "in_dims": [cexpr.lit(d) for d in x.dims], "num_entries": k.input(1).dims[0],
                     "starts": k.input(1).name, "ends": k.input(2).name,
                     "axes": k.input(3).name if k.has_input(3) else "",
                     "steps": k.input(4).name if k.has_input(4) else ""}
        offset = " + ".join(_times(f"start[{a}]", s) for a, s in enumerate(strides))
        kernel = strided_copy(k, x, y.dims, [_times(f"step[{a}]", s) for a, s in enumerate(strides)],
                              offset, template="c/slice.c.j2", helpers=("c/helpers/slice_plan.c.j2",), **plan_data)
        if k.data_dims:
            kernel.shape_template = "c/slice_shape.c.j2"
            kernel.shape_data = plan_data | {"dim_ptrs": data_dim_ptrs(k, y)}
        return kernel


def _times(var: str, stride: cexpr.CExpr) -> str:
    return var if stride == 1 else f"{var} * {cexpr.lit(stride)}"


def _const(value) -> Optional[list[int]]:
    return None if value is None else [clamp_big(int(v)) for v in value.reshape(-1)]


def _static_plan(shape: tuple, starts, ends, axes, steps) -> Optional[dict[int, tuple[int, int, int]]]:
    """axis -> (start, end, step) when every parameter is a constant and each sliced
    symbolic dim has a positive step; None if the plan is left to run time."""
    if starts is None or ends is None or axes is None or steps is None:
        return None
    steps = steps or [1] * len(starts)
    plan = {}
    for start, end, a, step in zip(starts, ends, axes, steps):
        if step < 0 and not isinstance(shape[a], int):
            return None
        plan[a % len(shape)] = (start, end, step)
    return plan


def _count(dims, d, start: int, end: int, step: int):
    """Elements along an axis of size ``d`` (int, or a symbol when step > 0)."""
    if isinstance(d, int):
        b, e = _clamped(d, start, end, step)
        return max(0, (e - b - 1) // step + 1) if step > 0 else max(0, (b - e - 1) // -step + 1)
    b, e = _clamp_sym(dims, d, start), _clamp_sym(dims, d, end)
    if b == 0:
        return dims.ceildiv(e, step)
    return dims.ceildiv(dims.sub(dims.expr("max", e, b), b), step)


def _clamped(d: int, start: int, end: int, step: int) -> tuple[int, int]:
    b = start + d if start < 0 else start
    e = end + d if end < 0 else end
    if step > 0:
        return min(max(b, 0), d), min(max(e, 0), d)
    return min(max(b, 0), d - 1), min(max(e, -1), d - 1)


def _clamp_sym(dims, d: str, v: int):
    """``v`` (a start or end, step > 0) clamped to [0, d] for a symbolic d; every step stays >= 0."""
    if v == 0:
        return 0
    if v >= BIG:
        return d
    if v > 0:
        return dims.expr("min", v, d)
    return dims.sub(dims.expr("max", d, -v), -v)


def _start_c(d: cexpr.CExpr, start: int, step: int) -> cexpr.CExpr:
    """C expression of the clamped start along an axis of size ``d``."""
    if isinstance(d, int):
        return _clamped(d, start, start, step)[0]
    if start == 0:
        return 0
    if start > 0:
        return f"({d} < {cexpr.lit(start)} ? {d} : {cexpr.lit(start)})"
    return f"({d} > {cexpr.lit(-start)} ? {d} - {cexpr.lit(-start)} : 0)"


@register("Slice", since=1, until=9)
class Slice1(SliceBase):
    """Y = X[starts:ends] along axes, from attributes."""

    def params(self, node, const):
        starts, ends = node.attrs.get("starts"), node.attrs.get("ends")
        axes = node.attrs.get("axes")
        return ([clamp_big(v) for v in starts or ()], [clamp_big(v) for v in ends or ()],
                list(axes) if axes else (), [1] * len(starts or ()))

    def num_entries(self, node, ctx):
        starts, ends = node.attrs.get("starts"), node.attrs.get("ends")
        if starts is None or ends is None or len(starts) != len(ends):
            raise ctx.fail("starts and ends must be given with the same length")
        return len(starts)


@register("Slice", since=10)
class Slice(SliceBase):
    """Y = X[starts:ends:steps] along axes, from inputs (maybe computed at run time)."""

    def params(self, node, const):
        return const(1), const(2), const(3), const(4)

    def num_entries(self, node, ctx):
        n = vector_len(ctx, 1, "starts")
        for i, what in ((2, "ends"), (3, "axes"), (4, "steps")):
            if ctx.has(i):
                check_index_type(ctx, ctx.inp(i).dtype, what)
                if vector_len(ctx, i, what) != n:
                    raise ctx.fail(f"{what} has {ctx.inp(i).shape[0]} entries, starts has {n}")
        check_index_type(ctx, ctx.inp(1).dtype, "starts")
        return n
