"""FusedMatMul: float32 MatMul of A (rank >= 2) by a 2-D B, with a bias per output column,
a residual of Y's shape and an activation applied to each output tile as the GEMM finishes it
(made by the fuse_matmul_epilogue pass from MatMul -> Add [-> Add] [-> activation])."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _fused, _gemm
from .mat_mul import matmul_shape
from .registry import InferContext, OpDef, register


@register("FusedMatMul", since=1, domain=_fused.DOMAIN)
class FusedMatMul(OpDef):
    """Y = act(A @ B + bias + Z). Inputs: A (..., M, K), B (K, N), bias (N) or none, Z (Y's
    shape) or none. Attributes: ``activation`` (an ONNX op name, "" for none) and
    ``activation_params``."""

    def infer(self, node: Node, ctx: InferContext):
        a, b = ctx.inp(0), ctx.inp(1)
        if a.dtype is not dt.FLOAT or b.dtype is not dt.FLOAT or len(a.shape) < 2 or len(b.shape) != 2:
            raise ctx.fail("FusedMatMul multiplies float32 A (rank >= 2) by a float32 matrix B")
        shape = matmul_shape(ctx, tuple(a.shape), tuple(b.shape))
        if ctx.has(2) and (ctx.inp(2).dtype is not dt.FLOAT or len(ctx.inp(2).shape) != 1):
            raise ctx.fail("the bias must be a float32 vector")
        if ctx.has(2):
            ctx.dims.same(ctx.inp(2).shape[0], shape[-1])
        if ctx.has(3) and tuple(ctx.inp(3).shape) != tuple(shape):
            raise ctx.fail(f"the residual Z must have Y's shape {list(shape)}, got {list(ctx.inp(3).shape)}")
        return [(dt.FLOAT, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, y = k.input(0), k.input(1), k.out
        m, kk = a.dims[-2], a.dims[-1]
        n = b.dims[1]
        rows = cexpr.mul(m, *a.dims[:-2])
        packed = None
        if k.target.prepack and b.value is not None:
            packed = k.constant("B_packed", _gemm.pack_cols(np.asarray(b.value, np.float32), k.target.gemm_nr))
        act = _fused.epilogue_act(node)
        epi = {"row_bias": "NULL", "col_bias": k.input(2).name if k.has_input(2) else "NULL",
               "residual": k.input(3).name if k.has_input(3) else "NULL", **act}
        kernel = k.kernel("c/fused_matmul.c.j2", helpers=(_gemm.HELPER,), rows=cexpr.lit(rows), N=cexpr.lit(n),
                          K=cexpr.lit(kk), a=a.name, b=packed or b.name, packed=packed, y=y.name, epi=epi,
                          kdim_check=None if kk == b.dims[0] else f"{cexpr.lit(kk)} != {cexpr.lit(b.dims[0])}")
        kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, rows, n, kk, few_rows_unpacked=True,
                                                  target=k.target)
        return kernel

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """MatMul, Add of the bias, Add of Z, then the activation, as standard ONNX nodes."""
        steps = [f"{node.name}_matmul"]
        nodes = [helper.make_node("MatMul", inputs[:2], [steps[-1]], name=node.name or None)]
        for i, what in ((2, "bias"), (3, "add")):
            if len(inputs) > i and inputs[i]:
                steps.append(f"{node.name}_{what}")
                nodes.append(helper.make_node("Add", [steps[-2], inputs[i]], [steps[-1]]))
        if node.attrs.get("activation"):
            nodes += _fused.activation_nodes(node, steps[-1], outputs[0])
        else:
            nodes.append(helper.make_node("Identity", [steps[-1]], [outputs[0]]))
        return nodes
