"""Convolution in the channels-blocked layout (compiler/passes/layout.py chooses where).

A blocked tensor holds an NCHW tensor's channels in blocks of BLOCK: shape
[N, C / BLOCK, H, W, BLOCK], element (n, c, h, w) at [n][c / BLOCK][h][w][c % BLOCK]. A 1x1
convolution then reads, for each output position, BLOCK input channels from one cache line
(NCHW puts them a whole plane apart), and every convolution reads its input with no im2col
and no packing: the kernel (c/conv_blocked.c.j2) keeps a tile of output blocks x positions
in registers while it walks the input blocks, like onnxruntime's NCHWc kernels.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _fused, _gemm
from .fused_conv import FusedConv
from .registry import InferContext, OpDef, register

BLOCK = 16   # channels per block: an AVX-512 vector, two of AVX2, four of NEON

# Blocked layout <-> NCHW, as the permutations the layout pass and the export use:
# [N, C/B, B, H, W] -> [N, C/B, H, W, B] and back.
TO_BLOCKED = (0, 1, 3, 4, 2)
FROM_BLOCKED = (0, 1, 4, 2, 3)


def blocked_shape(shape) -> tuple:
    """The blocked shape of an NCHW shape whose C is a multiple of BLOCK."""
    n, c, h, w = shape
    return (n, c // BLOCK, h, w, BLOCK)


def pack_weights(w: np.ndarray, ib: int = BLOCK) -> np.ndarray:
    """W [M, C, KH, KW] as [M/B][KH][KW][C/ib][ib input channels][B output channels]: a tap's
    weights for one output block, input block after input block, as the kernel reads them (ib:
    the input's channels per block, 1 for an NCHW input)."""
    m, c, kh, kw = w.shape
    return np.ascontiguousarray(
        w.astype(np.float32).reshape(m // BLOCK, BLOCK, c // ib, ib, kh, kw).transpose(0, 4, 5, 2, 3, 1))


def window_attrs(node: Node, ctx: InferContext) -> tuple:
    """((KH, KW), (SH, SW), (top, left, bottom, right)) of a blocked node, checked: kernel and
    strides at least 1, pads at least 0 and smaller than the kernel."""
    try:
        kernel = tuple(int(v) for v in node.attrs["kernel_shape"])
        strides = tuple(int(v) for v in node.attrs["strides"])
        pads = tuple(int(v) for v in node.attrs["pads"])
    except (KeyError, TypeError, ValueError):
        raise ctx.fail("kernel_shape, strides and pads must be given as integers") from None
    if len(kernel) != 2 or len(strides) != 2 or len(pads) != 4 or min(kernel + strides) < 1 or min(pads) < 0 \
            or max(pads[0], pads[2]) >= kernel[0] or max(pads[1], pads[3]) >= kernel[1]:
        raise ctx.fail(f"a 2-D window needs kernel and strides of at least 1 and pads of at least 0, smaller "
                       f"than the kernel: got {list(kernel)}, {list(strides)}, {list(pads)}")
    return kernel, strides, pads


@register("BlockedConv", since=1, domain=_fused.DOMAIN)
class BlockedConv(OpDef):
    """Y = act(conv(X, W) + B + Z) with Z and Y blocked ([N, C/16, H, W, 16]), X blocked or NCHW
    (a network's first convolution, of 3 channels); W [M, C, KH, KW] a constant, B [M] an
    optional constant. Made by the layout pass from Conv and FusedConv of
    one group and dilation 1: attributes ``kernel_shape``, ``strides``, ``pads`` (begins, ends),
    ``activation`` and ``activation_params`` (as FusedConv's)."""

    def infer(self, node: Node, ctx: InferContext):
        x, w = ctx.inp(0), ctx.inp(1)
        if x.dtype is not dt.FLOAT or len(x.shape) not in (4, 5) or len(x.shape) == 5 and x.shape[4] != BLOCK:
            raise ctx.fail(f"X must be a float32 tensor, NCHW or blocked [N, C/{BLOCK}, H, W, {BLOCK}]")
        channels = x.shape[1] * BLOCK if len(x.shape) == 5 else x.shape[1]
        if len(w.shape) != 4 or w.shape[0] % BLOCK or w.shape[1] != channels:
            raise ctx.fail(f"W must be [M, C, KH, KW] with M a multiple of {BLOCK} and C X's channels")
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = window_attrs(node, ctx)
        if (kh, kw) != tuple(w.shape[2:]):
            raise ctx.fail(f"kernel_shape {[kh, kw]} is not W's {list(w.shape[2:])}")
        if ctx.has(2) and tuple(ctx.inp(2).shape) != (w.shape[0],):
            raise ctx.fail(f"B must be a vector of the {w.shape[0]} output channels")
        if not all(isinstance(d, int) for d in x.shape):
            raise ctx.fail("X's sizes must be static")
        n, _, h, wd = x.shape[:4]
        oh, ow = (h + pt + pb - kh) // sh + 1, (wd + pl + pr - kw) // sw + 1
        if oh < 1 or ow < 1:
            raise ctx.fail("the kernel is larger than the padded input")
        shape = (n, w.shape[0] // BLOCK, oh, ow, BLOCK)
        if ctx.has(3) and tuple(ctx.inp(3).shape) != shape:
            raise ctx.fail(f"the residual Z must have Y's shape {list(shape)}, got {list(ctx.inp(3).shape)}")
        return [(dt.FLOAT, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, y = k.input(0), k.input(1), k.out
        n, cb, h, wd = x.dims[:4]
        ib = BLOCK if x.rank == 5 else 1
        mb, oh, ow = y.dims[1:4]
        kh, kw = node.attrs["kernel_shape"]
        sh, sw = node.attrs["strides"]
        pt, pl = node.attrs["pads"][:2]
        if w.value is None:
            raise k.unsupported("BlockedConv needs constant weights")
        packed = k.constant("W_blocked", pack_weights(np.asarray(w.value), ib))
        bias = k.input(2).name if k.has_input(2) else k.constant("B_zero", np.zeros(mb * BLOCK, np.float32))
        epilogue = _fused.epilogue_act(node)
        data = {
            "N": n, "CB": cb, "MB": mb, "H": h, "W": wd, "OH": oh, "OW": ow, "KH": kh, "KW": kw,
            "SH": sh, "SW": sw, "PT": pt, "PL": pl, "B": BLOCK, "IB": ib,
            "x_ptr": x.name, "y_ptr": y.name, "w_ptr": packed, "bias_ptr": bias,
            "residual": k.input(3).name if k.has_input(3) else None, "epi": epilogue,
            "MACS": n * mb * oh * ow * cb * kh * kw * BLOCK * ib,
            # the tile's output blocks (the kernel takes as many as the target's registers hold)
            "tile_blocks": list(range(1, min(4, mb) + 1)),
        }
        return k.kernel("c/conv_blocked.c.j2", helpers=(_gemm.HELPER, "c/helpers/blocked.c.j2"), **data)

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """The input and residual back to NCHW, the convolution as FusedConv exports it, and
        its result to the blocked layout."""
        prefix = node.outputs[0].name   # (unique, where node names may be empty)
        nodes: list = []

        def unblocked(name: str, tag: str, dims) -> str:
            t, r = f"{prefix}_{tag}_t", f"{prefix}_{tag}_nchw"
            shape = f"{prefix}_{tag}_shape"
            nodes.append(helper.make_node("Transpose", [name], [t], perm=list(FROM_BLOCKED)))
            nodes.append(helper.make_node("Constant", [], [shape], value=helper.make_tensor(
                shape, 7, [4], [0, -1, dims[2], dims[3]])))
            nodes.append(helper.make_node("Reshape", [t, shape], [r]))   # [N, C/B, B, H, W] -> NCHW
            return r

        x = node.inputs[0]
        conv_in = [unblocked(inputs[0], "x", x.shape) if len(x.shape) == 5 else inputs[0]] + list(inputs[1:3])
        if len(inputs) > 3 and inputs[3]:
            conv_in.append(unblocked(inputs[3], "z", node.inputs[3].shape))
        y = f"{prefix}_y_nchw"
        attrs = {a: v for a, v in node.attrs.items()}
        fused = Node("FusedConv", _fused.DOMAIN, prefix, [], [], attrs, opset=1)
        nodes += FusedConv().export(fused, conv_in, [y])
        shape, split, out = f"{prefix}_y_shape", f"{prefix}_y_split", node.outputs[0].shape
        nodes.append(helper.make_node("Constant", [], [shape], value=helper.make_tensor(
            shape, 7, [5], [0, -1, BLOCK, out[2], out[3]])))
        nodes.append(helper.make_node("Reshape", [y, shape], [split]))
        nodes.append(helper.make_node("Transpose", [split], outputs, perm=list(TO_BLOCKED)))
        return nodes


def macs(node: Node) -> int:
    """Multiply-adds of a Conv node with static shapes (the layout pass's estimate of its work)."""
    w = node.inputs[1].shape
    y = node.outputs[0].shape
    return int(np.prod(y)) * int(np.prod(w[1:]))

