"""Shared machinery of data movement and indexing ops: axis and index checks,
constant shape operands, data-dependent dims and the ``c/strided_copy.c.j2``
kernel family (every output element copied from ``X[offset + sum(i_a * stride_a)]``)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import RankKnownAtRunTime
from .registry import InferContext

INDEX_TYPES = (dt.INT32, dt.INT64)
# Larger than any dim: clamping a start/end/pad to this keeps dim arithmetic in int64.
BIG = 1 << 62


def norm_axis(ctx: InferContext, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank) made non-negative, or a shape error."""
    if not -rank <= axis < rank:
        raise ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(ctx: InferContext, axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
    """Every axis non-negative and distinct."""
    out = [norm_axis(ctx, int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.fail(f"{what} {list(axes)} repeat an axis")
    return out


def check_index_type(ctx: InferContext, dtype: dt.DType, what: str, allowed=INDEX_TYPES) -> None:
    if dtype not in allowed:
        raise ctx.fail(f"{what} must be {' or '.join(map(str, allowed))}, got {dtype}")


def vector_len(ctx: InferContext, i: int, what: str) -> int:
    """Length of 1-D input ``i``, which must be static (it fixes the output rank)."""
    v = ctx.inp(i)
    if len(v.shape) != 1:
        raise ctx.fail(f"{what} must be 1-D, got shape {v.shape}")
    if not isinstance(v.shape[0], int):
        raise RankKnownAtRunTime(f"{ctx.node.label}: the length of {what} is known only at run time")
    return v.shape[0]


def const_ints(ctx: InferContext, i: int) -> Optional[list[int]]:
    """Values of constant integer input ``i`` (flattened), or None when it is computed at run time."""
    value = ctx.const(i)
    return None if value is None else [int(x) for x in np.asarray(value).reshape(-1)]


def data_dim(ctx: InferContext, node) -> str:
    """A fresh dim that the node's shape template computes from tensor values."""
    return ctx.dims.data(node.name or node.op_type)


def data_dims(ctx: InferContext, node, count: int) -> list[str]:
    return [data_dim(ctx, node) for _ in range(count)]


def data_dim_ptrs(k: KernelContext, t: TensorRef) -> list[Optional[str]]:
    """Per axis of ``t``: the ``int64_t *`` a shape template sets (for dims from ``ctx.dims.data``), else None."""
    return [k.data_dim_ptr(d) for d in t.dims]


def clamp_big(v: int) -> int:
    return max(-BIG, min(BIG, v))


def scalar_literal(value: Any, t: dt.DType) -> str:
    """A C literal of compute type for a Python number (constant values, pad values)."""
    if t.kind == "float":
        x = float(value)
        if x != x:
            return "NAN"
        if x in (float("inf"), float("-inf")):
            return "INFINITY" if x > 0 else "-INFINITY"
        return x.hex() + ("f" if t.compute == "float" else "")
    if t.kind == "bool":
        return "1" if value else "0"
    x = int(value)
    if t is dt.INT64 and x == -2**63:
        return "INT64_MIN"
    if t is dt.INT64:
        return f"INT64_C({x})"
    if t is dt.UINT64:
        return f"UINT64_C({x})"
    if t is dt.INT32 and x == -2**31:
        return "INT32_MIN"
    return f"{x}u" if t is dt.UINT32 else str(x)


# --- strided copies ---------------------------------------------------------------

def simplify_loops(dims: Sequence[cexpr.CExpr], strides: Sequence[cexpr.CExpr]) -> tuple[list, list]:
    """Drop size-1 axes and merge adjacent axes that the source walks contiguously (with
    static strides, the inner one of static size: a symbolic batch merges with what follows)."""
    out_dims: list = []
    out_strides: list = []
    for d, s in zip(dims, strides):
        if d == 1:
            continue
        if out_dims and isinstance(d, int) \
                and isinstance(s, int) and isinstance(out_strides[-1], int) and out_strides[-1] == s * d:
            out_dims[-1] = cexpr.mul(out_dims[-1], d)
            out_strides[-1] = s
            continue
        out_dims.append(d)
        out_strides.append(s)
    return out_dims, out_strides


def loops_data(dims: Sequence[cexpr.CExpr], strides: Sequence[cexpr.CExpr]) -> list[dict[str, str]]:
    return [{"n": cexpr.lit(d), "stride": cexpr.lit(s)} for d, s in zip(dims, strides)]


# The shortest row a strided copy splits between threads.
ROW_MIN = 16


def strided_copy(k: KernelContext, src: TensorRef, dims: Sequence[cexpr.CExpr], strides: Sequence[cexpr.CExpr],
                 offset: cexpr.CExpr = 0, out: Optional[TensorRef] = None,
                 template: str = "c/strided_copy.c.j2", helpers: tuple[str, ...] = (), **extra: Any) -> Kernel:
    """Y (contiguous, viewed with ``dims``) [i...] = X[offset + sum(i_a * strides_a)].

    ``template`` may be a family template that sets up locals and includes strided_copy.c.j2."""
    out = out or k.out
    dims, strides = simplify_loops(list(dims), list(strides))
    transposed = _transpose_2d(dims, strides, offset) \
        if template == "c/strided_copy.c.j2" and k.target.tiled_transpose else None
    if transposed is not None:
        return k.kernel("c/transpose_2d.c.j2", src=src.name, dst=out.name, ctype=out.ctype, offset=offset,
                        **transposed)
    computed = isinstance(offset, str) and bool(dims)
    # Whole rows are copied on the threads where they have at least ROW_MIN elements (a row's
    # source offset found from its number by a division per axis) or one outer axis (none):
    # the 960 x 33 rows of 15 floats that DeepLabV3's padding regions slice took as long at 2
    # threads as at 1.
    rows = len(dims) >= 2 and strides[-1] == 1 and isinstance(dims[-1], int) \
        and (dims[-1] >= ROW_MIN or len(dims) == 2)
    return k.kernel(template, helpers=helpers, src=src.name, dst=out.name, ctype=out.ctype,
                    offset="base" if computed else cexpr.lit(offset), base=offset if computed else "",
                    loops=loops_data(dims, strides), rows_parallel=cexpr.lit(cexpr.prod(dims[:-1])) if rows else "",
                    **extra)


# A 2-D transposition's tile: source columns (destination rows) and the least source rows, and
# the elements a tile holds (a third of a 48 KiB first-level cache in float32).
TRANSPOSE_COLUMNS = 32
TRANSPOSE_ROWS = 32
TRANSPOSE_TILE = 4096
# (fewer source rows are a destination row's few elements: the walk in its order is as good)
TRANSPOSE_MIN_ROWS = 16


def _transpose_2d(dims: list, strides: list, offset: cexpr.CExpr) -> Optional[dict[str, int]]:
    """Template data of ``c/transpose_2d.c.j2`` where simplified static loops walk R x C matrices
    by columns (dims [C, R] with strides [1, C], after an optional batch of whole matrices), R
    at least TRANSPOSE_MIN_ROWS, else None. Walked in the destination's order, such a source is
    read once per column, each pass using a line's one element (NHWC to NCHW of a 224 x 224 x 3
    image: three passes over 600 KB)."""
    if not all(isinstance(v, int) for v in (*dims, *strides, offset)) or len(dims) not in (2, 3):
        return None
    *batch, cols, rows = dims
    *batch_stride, col_stride, row_stride = strides
    if col_stride != 1 or row_stride != cols or batch and batch_stride[0] != rows * cols or cols < 2 \
            or rows < TRANSPOSE_MIN_ROWS:
        return None
    tc = min(cols, TRANSPOSE_COLUMNS)
    tr = min(rows, max(TRANSPOSE_ROWS, TRANSPOSE_TILE // tc))
    return {"NB": batch[0] if batch else 1, "R": rows, "C": cols, "TR": tr, "TC": tc}


def permuted_strides(dims: Sequence[cexpr.CExpr], perm: Sequence[int]) -> list[cexpr.CExpr]:
    """Source strides for walking a contiguous tensor of ``dims`` in the axis order ``perm``."""
    strides = cexpr.strides(list(dims))
    return [strides[p] for p in perm]


# --- elementwise indexing (GatherElements, ScatterElements) ---------------------------------

def check_elements_shapes(ctx: InferContext, data_shape: tuple, indices_shape: tuple, axis: int) -> None:
    """indices has data's rank and, off ``axis``, dims no larger than data's."""
    if len(indices_shape) != len(data_shape):
        raise ctx.fail(f"indices rank {len(indices_shape)} differs from data rank {len(data_shape)}")
    for a, (i, d) in enumerate(zip(indices_shape, data_shape)):
        if a != axis and isinstance(i, int) and isinstance(d, int) and i > d:
            raise ctx.fail(f"indices dim {a} ({i}) exceeds the data dim ({d})")


def elements_data(k: KernelContext, data: TensorRef, indices: TensorRef, axis: int, op: str) -> dict[str, Any]:
    """Template data walking ``indices`` with the matching ``data`` offsets (the axis term comes from the index)."""
    strides = data.strides
    checks = [{"cond": f"{cexpr.lit(i)} > {cexpr.lit(d)}",
               "msg": c_string(f"{op}: indices dim {a} exceeds the data dim")}
              for a, (i, d) in enumerate(zip(indices.dims, data.dims))
              if a != axis and not (isinstance(i, int) and isinstance(d, int)) and i != d]
    loops = loops_data(indices.dims, [0 if a == axis else s for a, s in enumerate(strides)])
    return {"loops": loops, "checks": checks, "dim": cexpr.lit(data.dims[axis]),
            "axis_stride": cexpr.lit(strides[axis]), "indices": indices.name}


def reduction_expr(reduction: str, y: str, u: str, t: dt.DType) -> str:
    """Compute-type C expression combining the current output value ``y`` with an update ``u``."""
    if reduction == "none":
        return u
    if t.kind == "bool":
        return {"add": f"({y} || {u})", "mul": f"({y} && {u})", "max": f"({y} || {u})",
                "min": f"({y} && {u})"}[reduction]
    return {"add": f"{y} + {u}", "mul": f"{y} * {u}", "max": f"({u} > {y} ? {u} : {y})",
            "min": f"({u} < {y} ? {u} : {y})"}[reduction]
