"""FusedAttention: float32 O = Softmax(scale(Q K) [+ mask]) V along the last axis, with the
scores made and used a block of query rows at a time, never stored whole (made by the
fuse_attention pass from MatMul -> [Mul / Div by a constant] -> [Add of a mask] -> Softmax ->
MatMul, the attention of an export that did not use an attention op: Whisper's encoder,
ViT, BERT). A 30-second Whisper-tiny encoder has 6 x 1500 x 1500 scores per layer: 54 MB
written by the first MatMul, read and written by the Softmax and read by the second; here
each block of rows stays in the cache between its two GEMMs."""
from __future__ import annotations

from typing import Optional

import numpy as np
from onnx import helper

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ..ir import Node
from . import _fused, _gemm
from .mat_mul import _batch_terms, matmul_shape
from .registry import InferContext, OpDef, register

# Scores of a block of query rows: about this many floats (192 KB, in L2), at least 12 rows.
BLOCK_FLOATS = 49152


def mask_strides(mask_shape: tuple, scores_shape: tuple) -> Optional[list]:
    """The mask's element strides along each axis of the scores: 0 where its dim is 1, its own
    stride where its dim is the scores', and where a symbolic dim of the mask may be either, a
    C expression choosing at run time (the kernel checks that it is one of them). None where
    the mask cannot broadcast to the scores (more axes, or a known dim that differs)."""
    if len(mask_shape) > len(scores_shape):
        return None
    padded = (1,) * (len(scores_shape) - len(mask_shape)) + tuple(mask_shape)
    own = cexpr.strides(list(padded))
    strides: list = []
    for d, s, st in zip(padded, scores_shape, own):
        if d == 1:
            strides.append(0)
        elif d == s:
            strides.append(st)
        elif isinstance(d, int) and isinstance(s, int):
            return None
        else:
            strides.append(f"({cexpr.lit(d)} == 1 ? 0 : {cexpr.lit(st)})")
    return strides


def mask_checks(mask_shape: tuple, scores_shape: tuple) -> list[str]:
    """C conditions that fail where a symbolic dim of the mask is neither 1 nor the scores'."""
    padded = (1,) * (len(scores_shape) - len(mask_shape)) + tuple(mask_shape)
    return [f"({cexpr.lit(d)} != 1 && {cexpr.lit(d)} != {cexpr.lit(s)})"
            for d, s in zip(padded, scores_shape) if d != 1 and d != s]


@register("FusedAttention", since=1, domain=_fused.DOMAIN)
class FusedAttention(OpDef):
    """O = Softmax(S [+ mask], axis=-1) V with S = (Q K) * scale or (Q K) / scale. Inputs: Q
    (..., Sq, D), K (..., D, Skv) (the keys already transposed), V (..., Skv, Dv), mask
    (broadcast to (..., Sq, Skv)) or none; Q, K and V of one rank, their batch axes broadcast
    as MatMul's. Attributes: ``scale`` and ``scale_op`` ("Mul", "Div" or "" for none);
    ``nan_fill`` (optional): the value that replaces a NaN probability, as exporters write
    Where(IsNaN(P), 0, P) after the softmax for rows whose keys are all masked."""

    def infer(self, node: Node, ctx: InferContext):
        q, kt, v = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        if any(t.dtype is not dt.FLOAT for t in (q, kt, v)) or len(q.shape) < 3 \
                or not len(q.shape) == len(kt.shape) == len(v.shape):
            raise ctx.fail("FusedAttention takes float32 Q, K and V of one rank, at least 3")
        scores = matmul_shape(ctx, tuple(q.shape), tuple(kt.shape))
        if ctx.has(3) and (ctx.inp(3).dtype is not dt.FLOAT
                           or mask_strides(tuple(ctx.inp(3).shape), scores) is None):
            raise ctx.fail("the mask must be float32 and broadcast to the scores")
        return [(dt.FLOAT, matmul_shape(ctx, scores, tuple(v.shape)))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        q, kt, v, y = k.input(0), k.input(1), k.input(2), k.out
        batch = list(y.dims[:-2])
        sq, d, skv, dv = q.dims[-2], q.dims[-1], kt.dims[-1], v.dims[-1]
        mask = None
        if k.has_input(3):
            m = k.input(3)
            scores = tuple(batch) + (sq, skv)
            strides = mask_strides(tuple(m.dims), scores)
            mask = {"name": m.name, "batch": [cexpr.lit(s) for s in strides[:-2]],
                    "row": cexpr.lit(strides[-2]), "col": cexpr.lit(strides[-1]),
                    "checks": mask_checks(tuple(m.dims), scores)}
        scale_op = node.attrs.get("scale_op", "")
        scale = float_literal(node.attrs.get("scale", 1.0), "float")
        nan_fill = node.attrs.get("nan_fill")
        nan_fill = float_literal(nan_fill, "float") if nan_fill is not None else None
        nr = k.target.gemm_nr
        # K and V as the GEMM's panels of nr columns (onnxc_sgemm_pack_b_panels), each thread its own
        key_floats = cexpr.mul(d, cexpr.round_up(skv, nr))
        panel_floats = cexpr.add(key_floats, cexpr.mul(skv, cexpr.round_up(dv, nr)))
        scores_floats = cexpr.add(BLOCK_FLOATS, cexpr.mul(12, skv))   # (qb * Skv at most)
        kernel = k.kernel("c/fused_attention.c.j2", helpers=(_gemm.HELPER,), mode="softmax",
                          q=q.name, k=kt.name, v=v.name, y=y.name, mask=mask,
                          batch=[cexpr.lit(b) for b in batch], Sq=cexpr.lit(sq), D=cexpr.lit(d),
                          q_terms=_batch_terms(q.dims[:-2], batch, cexpr.mul(sq, d)),
                          k_terms=_batch_terms(kt.dims[:-2], batch, cexpr.mul(d, skv)),
                          v_terms=_batch_terms(v.dims[:-2], batch, cexpr.mul(skv, dv)),
                          Skv=cexpr.lit(skv), Dv=cexpr.lit(dv), block_floats=BLOCK_FLOATS,
                          scale_op=scale_op, scale=scale, nan_fill=nan_fill, key_floats=cexpr.lit(key_floats),
                          panel_floats=cexpr.lit(panel_floats), scores_floats=cexpr.lit(scores_floats))
        threads = max(k.target.threads, 1)
        rows = 384   # (more than a block of scores ever has: the GEMM's pack for its most rows)
        pack = [_gemm.pack_bytes(_gemm.FLOAT, rows, skv, d, target=k.target),
                _gemm.pack_bytes(_gemm.FLOAT, rows, dv, skv, target=k.target)]
        kernel.scratch["pack"] = max(pack) if all(isinstance(p, int) for p in pack) else cexpr.add(*pack)
        kernel.scratch["scores"] = cexpr.mul(threads, 4, scores_floats)
        kernel.scratch["panels"] = cexpr.mul(threads, 4, panel_floats)
        return kernel

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """MatMul, the scale, the mask's Add, Softmax and MatMul, as standard ONNX nodes."""
        prefix = node.name or "attention"
        steps = [f"{prefix}_scores"]
        nodes = [helper.make_node("MatMul", inputs[:2], [steps[-1]])]
        op = node.attrs.get("scale_op", "")
        if op:
            c = f"{prefix}_scale"
            nodes.append(helper.make_node("Constant", [], [c], value=helper.make_tensor(
                c, 1, [], [float(np.float32(node.attrs["scale"]))])))
            steps.append(f"{prefix}_scaled")
            nodes.append(helper.make_node(op, [steps[-2], c], [steps[-1]]))
        if len(inputs) > 3 and inputs[3]:
            steps.append(f"{prefix}_masked")
            nodes.append(helper.make_node("Add", [steps[-2], inputs[3]], [steps[-1]]))
        probs = f"{prefix}_probs"
        nodes.append(helper.make_node("Softmax", [steps[-1]], [probs], axis=-1))
        if node.attrs.get("nan_fill") is not None:
            fill = f"{prefix}_nan_fill"
            nodes += [helper.make_node("Constant", [], [fill], value=helper.make_tensor(
                          fill, 1, [], [float(np.float32(node.attrs["nan_fill"]))])),
                      helper.make_node("IsNaN", [probs], [f"{prefix}_nan"]),
                      helper.make_node("Where", [f"{prefix}_nan", fill, probs], [f"{prefix}_filled"])]
            probs = f"{prefix}_filled"
        nodes.append(helper.make_node("MatMul", [probs, inputs[2]], [outputs[0]]))
        return nodes
