"""Shared machinery of the signal ops (DFT, STFT, window functions, MelWeightMatrix):
scalar operands read while compiling or at run time, and the output type attribute."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ._indexing import INDEX_TYPES, data_dim
from .registry import InferContext, OpDef

PI = "3.14159265358979323846"


def scalar_int(ctx: InferContext, i: int, what: str) -> Optional[int]:
    """Value of the one-element int32/int64 input ``i`` when it is constant, else None."""
    v = ctx.inp(i)
    if v.dtype not in INDEX_TYPES:
        raise ctx.fail(f"{what} must be int32 or int64, got {v.dtype}")
    if any(isinstance(d, int) and d != 1 for d in v.shape):
        raise ctx.fail(f"{what} must be a scalar, got shape {v.shape}")
    value = ctx.const(i)
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


def output_type(ctx: InferContext, node, allowed: tuple[dt.DType, ...]) -> dt.DType:
    """The element type named by the ``output_datatype`` attribute."""
    out = dt.from_onnx(int(node.attrs.get("output_datatype", 1)))
    if out not in allowed:
        raise ctx.fail(f"output_datatype {out} is not allowed")
    return out


class Window(OpDef):
    """A generalized cosine window: w[n] = sum_k a_k cos(2 pi k n / N)."""
    # Cosine coefficients a_0, a_1, ... with alternating signs already applied.
    coefficients: tuple[float, ...] = ()
    types = dt.FLOATS + dt.INTS

    def infer(self, node, ctx):
        size = scalar_int(ctx, 0, "size")
        if size is not None and size < 0:
            raise ctx.fail(f"size {size} is negative")
        return [(output_type(ctx, node, self.types), (data_dim(ctx, node) if size is None else size,))]

    def lower(self, node, k: KernelContext) -> Kernel:
        y = k.out
        terms = [repr(self.coefficients[0])]
        for i, a in enumerate(self.coefficients[1:], start=1):
            phase = "phase" if i == 1 else f"{i}.0 * phase"
            terms.append(f"{'-' if a < 0 else '+'} {abs(a)!r} * cos({phase})")
        kernel = k.kernel("c/window.c.j2", Y=y.name, size=cexpr.lit(y.dims[0]),
                          periodic=bool(node.attrs.get("periodic", 1)), pi=PI,
                          value=" ".join(terms), store=y.store("w" if y.dtype.is_float else "(w == w ? w : 0.0)"))
        if k.data_dims:
            kernel.shape_template = "c/signal_dim_shape.c.j2"
            kernel.shape_data = {"value": k.input(0).name + "[0]", "minimum": 0,
                                 "err": c_string(f"{node.op_type}: size is negative")}
        return kernel
