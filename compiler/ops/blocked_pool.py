"""MaxPool and AveragePool in the channels-blocked layout (compiler/ops/blocked_conv.py): each
window's 16 channels of a block are one vector (c/pool_blocked.c.j2)."""
from __future__ import annotations

from onnx import helper

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _fused
from .blocked_conv import BLOCK, FROM_BLOCKED, TO_BLOCKED, window_attrs
from .registry import InferContext, OpDef, register


@register("BlockedPool", since=1, domain=_fused.DOMAIN)
class BlockedPool(OpDef):
    """Y = max (``mode`` "max") or mean ("avg", with ``count_include_pad``) over each window of a
    blocked float32 X [N, C/16, H, W, 16]; made by the layout pass from a 2-D MaxPool (no
    Indices, no dilation) or AveragePool of floor mode. Attributes ``kernel_shape``, ``strides``,
    ``pads`` (begins, ends), ``mode``, ``count_include_pad``."""

    def infer(self, node: Node, ctx: InferContext):
        x = ctx.inp(0)
        if x.dtype is not dt.FLOAT or len(x.shape) != 5 or x.shape[4] != BLOCK:
            raise ctx.fail(f"X must be a blocked float32 tensor [N, C/{BLOCK}, H, W, {BLOCK}]")
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = window_attrs(node, ctx)
        if node.attrs.get("mode") not in ("max", "avg"):
            raise ctx.fail(f"mode must be \"max\" or \"avg\", got {node.attrs.get('mode')!r}")
        if not all(isinstance(d, int) for d in x.shape):
            raise ctx.fail("X's sizes must be static")
        n, cb, h, w, _ = x.shape
        oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
        if oh < 1 or ow < 1:
            raise ctx.fail("the window is larger than the padded input")
        return [(dt.FLOAT, (n, cb, oh, ow, BLOCK))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        n, cb, h, w = x.dims[:4]
        kh, kw = node.attrs["kernel_shape"]
        sh, sw = node.attrs["strides"]
        pt, pl = node.attrs["pads"][:2]
        return k.kernel("c/pool_blocked.c.j2", helpers=("c/helpers/blocked.c.j2",),
                        N=n, CB=cb, H=h, W=w, OH=y.dims[2], OW=y.dims[3], KH=kh, KW=kw, SH=sh, SW=sw, PT=pt, PL=pl,
                        B=BLOCK, x_ptr=x.name, y_ptr=y.name, mode=node.attrs["mode"],
                        include_pad=bool(node.attrs.get("count_include_pad", 0)))

    def export(self, node: Node, inputs: list[str], outputs: list[str]) -> list:
        """The input back to NCHW, the standard pool, its result to the blocked layout."""
        prefix = node.outputs[0].name   # (unique, where node names may be empty)
        x, y = node.inputs[0].shape, node.outputs[0].shape
        nodes = [helper.make_node("Transpose", [inputs[0]], [f"{prefix}_x_t"], perm=list(FROM_BLOCKED)),
                 helper.make_node("Constant", [], [f"{prefix}_x_shape"], value=helper.make_tensor(
                     f"{prefix}_x_shape", 7, [4], [0, -1, x[2], x[3]])),
                 helper.make_node("Reshape", [f"{prefix}_x_t", f"{prefix}_x_shape"], [f"{prefix}_x_nchw"])]
        attrs = {"kernel_shape": list(node.attrs["kernel_shape"]), "strides": list(node.attrs["strides"]),
                 "pads": list(node.attrs["pads"])}
        if node.attrs["mode"] == "avg":
            nodes.append(helper.make_node("AveragePool", [f"{prefix}_x_nchw"], [f"{prefix}_y_nchw"],
                                          count_include_pad=int(node.attrs.get("count_include_pad", 0)), **attrs))
        else:
            nodes.append(helper.make_node("MaxPool", [f"{prefix}_x_nchw"], [f"{prefix}_y_nchw"], **attrs))
        nodes += [helper.make_node("Constant", [], [f"{prefix}_y_shape"], value=helper.make_tensor(
                      f"{prefix}_y_shape", 7, [5], [0, -1, BLOCK, y[2], y[3]])),
                  helper.make_node("Reshape", [f"{prefix}_y_nchw", f"{prefix}_y_shape"], [f"{prefix}_y_split"]),
                  helper.make_node("Transpose", [f"{prefix}_y_split"], outputs, perm=list(TO_BLOCKED))]
        return nodes
