"""Shared pieces of the binary elementwise ops (arithmetic, comparison, logic, bitwise):
opset < 7 broadcasting attributes, integer arithmetic that wraps instead of
overflowing, and the zero-divisor check of integer Div and Mod."""
from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar, Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..dims import Shape, broadcast_shapes
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import Binary, Variadic, check_dtype, elementwise_kernel
from .registry import InferContext

# Opsets before 7 broadcast only with broadcast=1, aligning B to A at ``axis``.
LEGACY_UNTIL = 6


def legacy_padding(node: Node, rank_a: int, rank_b: int) -> Optional[tuple[int, int]]:
    """(leading, trailing) 1-dims that align B to A under opset < 7 ``broadcast=1``;
    None when B must have A's shape (``broadcast=0``) or the opset broadcasts like numpy."""
    if node.version > LEGACY_UNTIL or not node.attrs.get("broadcast", 0):
        return None
    axis = node.attrs.get("axis", rank_a - rank_b)
    if axis < 0:
        axis += rank_a
    if axis < 0 or axis + rank_b > rank_a:
        raise ValueError(f"B of rank {rank_b} does not fit A of rank {rank_a} at axis {axis}")
    return axis, rank_a - axis - rank_b


class Broadcasting(Binary):
    """Binary op with numpy broadcasting (opset 7+) or the legacy ``broadcast``/``axis`` rules."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, a.dtype, self.types)
        self.check_pair(ctx, a.dtype, b.dtype)
        return [(self.out_dtype(a.dtype), self.out_shape(node, ctx, a.shape, b.shape))]

    def out_shape(self, node: Node, ctx: InferContext, a: Shape, b: Shape) -> Shape:
        if node.version > LEGACY_UNTIL:
            return broadcast_shapes(ctx.dims, a, b)
        try:
            pad = legacy_padding(node, len(a), len(b))
        except ValueError as e:
            raise ctx.fail(str(e)) from None
        if pad is None:
            if len(a) != len(b):
                raise ctx.fail(f"shapes {a} and {b} differ and broadcast=0")
            return tuple(ctx.dims.same(x, y) for x, y in zip(a, b))
        aligned = (1,) * pad[0] + tuple(b) + (1,) * pad[1]
        return broadcast_shapes(ctx.dims, a, aligned)

    def operands(self, node: Node, k: KernelContext) -> list[TensorRef]:
        """A and B, B's dims padded with 1s under legacy broadcasting."""
        a, b = k.input(0), k.input(1)
        pad = legacy_padding(node, a.rank, b.rank)
        if pad:
            lead, trail = (1,) * pad[0], (1,) * pad[1]
            b = dataclasses.replace(b, shape=lead + tuple(b.shape) + trail,
                                    dims=list(lead) + list(b.dims) + list(trail))
        return [a, b]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b = self.operands(node, k)
        return elementwise_kernel(k, [a, b], lambda v: self.scalar(v[0], v[1], node, a))


class Comparison(Broadcasting):
    """Comparison of two same-typed tensors to bool."""
    types: ClassVar = dt.NUMERIC
    operator: ClassVar[str] = ""

    def out_dtype(self, a: dt.DType) -> dt.DType:
        return dt.BOOL

    def scalar(self, a: str, b: str, node: Node, t: TensorRef) -> str:
        return f"{a} {self.operator} {b}"


def wrapping(op: str, a: str, b: str, t: dt.DType) -> str:
    """``a op b`` (+, -, *) in ``t``'s compute type; integers wrap like onnxruntime does on
    x86 instead of overflowing (signed overflow, or uint16 products promoted to int)."""
    if t.kind == "int" and t.itemsize >= 4:
        u = f"u{t.c_type}"
        return f"({t.c_type})(({u}){a} {op} ({u}){b})"
    if t is dt.UINT16 and op == "*":
        return f"(uint32_t){a} * {b}"
    return f"{a} {op} {b}"


def nonzero_divisor_kernel(k: KernelContext, operands: list[TensorRef], scalar: Callable[[list[str]], str],
                           divisor: TensorRef, message: str) -> Kernel:
    """Elementwise kernel that first fails on any zero in an integer ``divisor``."""
    kernel = elementwise_kernel(k, operands, scalar)
    if not divisor.dtype.is_int or (divisor.value is not None and np.all(divisor.value != 0)):
        return kernel
    kernel.template = "c/nonzero_divisor.c.j2"
    kernel.data.update(divisor=divisor.name, divisor_numel=cexpr.lit(divisor.numel), message=c_string(message))
    return kernel


class Folding(Variadic):
    """Variadic op folded left to right: numpy broadcasting from opset 8, equal shapes before."""

    def infer(self, node: Node, ctx: InferContext):
        if node.version >= 8:
            return super().infer(node, ctx)
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        shape = xs[0].shape
        for x in xs:
            check_dtype(ctx, x.dtype, self.types)
            if x.dtype != xs[0].dtype:
                raise ctx.fail(f"input types differ: {xs[0].dtype} and {x.dtype}")
            if len(x.shape) != len(shape):
                raise ctx.fail(f"input shapes {shape} and {x.shape} differ (no broadcasting before opset 8)")
            try:
                shape = tuple(ctx.dims.same(p, q) for p, q in zip(shape, x.shape))
            except ShapeError as e:
                raise ctx.fail(f"{e} (no broadcasting before opset 8)") from None
        return [(xs[0].dtype, shape)]


def extremum(which: str, a: str, b: str, t: dt.DType) -> str:
    """Max or min (``which``) of two compute-type values via ``c/helpers/minmax.c.j2``."""
    suffix = {"float": "f32", "double": "f64"}.get(t.compute) or ("u64" if t.kind in ("uint", "bool") else "i64")
    call = f"onnxc_{which}_{suffix}({a}, {b})"
    # narrower integers: the 64-bit result is one of the operands, back in their type
    return call if t.compute in ("float", "double", "int64_t", "uint64_t") else f"(({t.compute}){call})"
