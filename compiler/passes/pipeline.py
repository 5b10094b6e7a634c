"""The pass pipeline, in order. Read it top to bottom."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import Graph
from .fuse import (fold_batch_norm, fold_conv_scale_shift, fuse_attention, fuse_conv_epilogue, fuse_conv_prologue,
                   fuse_elementwise, fuse_matmul_epilogue, scale_shift_batch_norm)
from .infer import fold_constants, infer_shapes
from .layout import blocked_conv_layout
from .quantized import fuse_qdq
from .padding import split_padding_regions, trim_padding_taps
from .simplify import (eliminate_common_subexpressions, eliminate_dead_code, global_pool_from_reduce_mean,
                       remove_identity_like)
from .verify import verify

Pass = Callable[[Graph], None]

# Level 0 runs only what code generation needs; 1 (BASIC) adds graph cleanups and folds
# that keep standard ops; 2 (EXTENDED) fuses nodes into onnxc's internal kernels; 99 (ALL)
# also packs constant weights for the target's GEMM tile (done in lowering: Target.prepack).
PIPELINE: list[tuple[str, Pass, int]] = [
    ("infer_shapes", infer_shapes, 0),
    ("fuse_qdq", fuse_qdq, 2),              # before folding turns DequantizeLinear of weights to float
    ("fold_constants", fold_constants, 1),
    ("remove_identity_like", remove_identity_like, 1),
    ("global_pool_from_reduce_mean", global_pool_from_reduce_mean, 1),
    ("eliminate_common_subexpressions", eliminate_common_subexpressions, 1),
    ("fold_batch_norm", fold_batch_norm, 1),
    ("scale_shift_batch_norm", scale_shift_batch_norm, 1),
    ("fold_conv_scale_shift", fold_conv_scale_shift, 1),
    ("trim_padding_taps", trim_padding_taps, 1),
    ("split_padding_regions", split_padding_regions, 1),
    ("eliminate_dead_code", eliminate_dead_code, 0),
    ("fuse_conv_epilogue", fuse_conv_epilogue, 2),
    ("fuse_conv_prologue", fuse_conv_prologue, 99),   # (its kernel needs the weights packed: level 99)
    ("fuse_matmul_epilogue", fuse_matmul_epilogue, 2),
    ("fuse_attention", fuse_attention, 2),
    ("fuse_elementwise", fuse_elementwise, 2),
    ("blocked_conv_layout", blocked_conv_layout, 99),   # chains of convolutions in 16-channel blocks
]

# Choices made in lowering rather than by a pass, which ``disabled_passes`` (onnxruntime's
# ``disabled_optimizers``) turns off by the same names, with the level they start at.
#   conv_winograd: float32 3x3 stride-1 convolutions by Winograd's F(4x4, 3x3) or F(2x2, 3x3)
#   where that is estimated cheaper than im2col (compiler/ops/conv.py); its rounding error
#   is up to about 3e-6 of the output's magnitude, against about 5e-7 for im2col.
#   conv_direct: small float32 convolutions of one group, and large kernels of stride 1, computed
#   directly over the input's rows (c/conv_grouped.c.j2) where that beats im2col and the GEMM.
LOWERINGS: dict[str, int] = {
    "conv_winograd": 99,
    "conv_direct": 99,
}

# Passes that run only for some targets ("native": this machine's shared library; "c": a
# freestanding source package). fuse_attention's kernel blocks its scores for a host's cache.
# fuse_qdq keeps int8 weights and integer arithmetic: what a
# microcontroller needs, and on the host the 8-bit GEMM (c/helpers/qgemm.c.j2) that computes
# the same integers as onnxruntime's QDQ kernels; CUDA builds run the float kernels on the
# dequantized weights.
TARGETS: dict[str, tuple[str, ...]] = {
    "fuse_qdq": ("c", "native"),
    "fuse_attention": ("native",),   # (its kernel calls the host's float32 GEMM)
    "fuse_conv_prologue": ("native",),   # (the host's GEMM packs X with the prologue applied)
    "blocked_conv_layout": ("native",),   # (its kernel is the host's SIMD; CUDA keeps NCHW)
}


# Passes whose kernels pay only with the build's SIMD (c/helpers/simd.c.j2): a portable build's
# C loops run the blocked convolutions at half the speed of its NCHW GEMM (open_nsfw 157 against
# 75 ms at 1 thread, Sapphire Rapids, -march unset).
SIMD_ONLY: frozenset[str] = frozenset({"blocked_conv_layout"})


def run_pipeline(graph: Graph, level: int = 99, check: bool = False,
                 disabled: Optional[set[str]] = None,
                 trace: Optional[Callable[[str, Graph], None]] = None, target: str = "native",
                 simd: bool = True) -> Graph:
    """Run every pass up to ``level`` for ``target`` (``simd``: its build has SIMD kernels);
    with ``check`` verify the IR after each one."""
    for name, fn, min_level in PIPELINE:
        if min_level > level or (disabled and name in disabled) or target not in TARGETS.get(name, (target,)) \
                or (not simd and name in SIMD_ONLY):
            continue
        _apply(fn, graph)
        if check:
            verify(graph)
        if trace is not None:
            trace(name, graph)
    return graph


def _apply(fn: Pass, graph: Graph) -> None:
    """A pass runs on a graph, then on the bodies of its control-flow nodes."""
    fn(graph)
    for node in graph.nodes:
        for body in node.subgraphs.values():
            _apply(fn, body)
