"""QLinearConv through CMSIS-NN (``--cmsis-nn``, ``--target c``): an eligible node calls
``arm_convolve_wrapper_s8`` or ``arm_depthwise_conv_wrapper_s8`` with its weights transposed at
compile time (OHWI, or 1HWC for depthwise) and its activations transposed around the call (NCHW
to NHWC and back, in the node's scratch). The requantization is CMSIS-NN's fixed point, which
the portable kernels compute too in that mode, so both give the same bits. ``conv_reason``
says why a node is not eligible; it then keeps the portable kernel."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _quantize as qz
from ._conv_pool import pads_c, window

CONV_HELPER = "c/helpers/cmsis_nn.c.j2"


def conv_reason(node: Node, k: KernelContext) -> Optional[str]:
    """Why CMSIS-NN cannot compute this QLinearConv (None when it can)."""
    x, w, y = k.input(0), k.input(3), k.out
    if x.dtype is not dt.INT8 or w.dtype is not dt.INT8 or y.dtype is not dt.INT8:
        return "CMSIS-NN's int8 kernels take int8 x, w and y (not uint8)"
    if x.rank != 4:
        return "CMSIS-NN convolves two spatial axes"
    if not all(isinstance(d, int) for d in (*x.dims, *y.dims)):
        return "dims known only at run time"
    if w.value is None:
        return "weights that are not constant"
    w_zero = k.input(5).value
    if w_zero is None or np.any(np.asarray(w_zero) != 0):
        return "weights with a nonzero zero point (CMSIS-NN's are symmetric)"
    for i in (2, 7):
        if k.input(i).value is None:
            return "zero points that are not constant"
    if k.has_input(8) and k.input(8).value is None:
        return "a bias that is not constant"
    group = node.attrs.get("group", 1)
    c, m = x.dims[1], w.dims[0]
    if group not in (1, c) or (group == c and m % c):
        return f"group {group}: CMSIS-NN has plain and depthwise convolutions"
    win = window(node, 2, w.shape[2:], k.unsupported)
    begins, _ = pads_c(win, x.dims[2:], y.dims[2:])
    if any(not isinstance(b, int) or b < 0 for b in begins):
        return "negative pads"
    return None


def conv_kernel(node: Node, k: KernelContext, scale: qz.OutputScale) -> Kernel:
    """The call of CMSIS-NN's convolution (c/cmsis_nn_conv.c.j2) for an eligible node."""
    x, w, y = k.input(0), k.input(3), k.out
    n, c, h, wd = x.dims
    m, _, kh, kw = w.dims
    oh, ow = y.dims[2], y.dims[3]
    group = node.attrs.get("group", 1)
    depthwise = group == c and group > 1
    win = window(node, 2, w.shape[2:], k.unsupported)
    begins, _ = pads_c(win, x.dims[2:], y.dims[2:])
    weights = np.asarray(w.value, np.int8)
    if depthwise:   # (M, 1, KH, KW) -> (1, KH, KW, M)
        packed = weights.reshape(m, kh, kw).transpose(1, 2, 0)
    else:           # (M, C, KH, KW) -> (M, KH, KW, C)
        packed = weights.transpose(0, 2, 3, 1)
    bias = np.zeros(m, np.int32) if not k.has_input(8) else np.asarray(k.input(8).value, np.int32).reshape(-1)
    for name in (scale.multiplier, scale.shift):   # CMSIS-NN reads one per output channel
        k.constants[name] = np.ascontiguousarray(np.broadcast_to(k.constants[name], (m,)))
    data = {
        "depthwise": depthwise, "N": n, "C": c, "H": h, "W": wd, "M": m, "OH": oh, "OW": ow, "KH": kh, "KW": kw,
        "stride": win.strides, "pad": begins, "dilation": win.dilations, "ch_mult": m // c if depthwise else 1,
        "x": x.name, "y": y.name, "x_zero": int(np.asarray(k.input(2).value).reshape(-1)[0]),
        "y_zero": int(np.asarray(k.input(7).value).reshape(-1)[0]),
        "weights": k.constant("cmsis_weights", np.ascontiguousarray(packed)),
        "bias": k.constant("cmsis_bias", bias),
        "multiplier": scale.multiplier, "shift": scale.shift,
        "buffer_bytes": _conv_buffer_bytes(depthwise, c, kh, kw, win.strides[1], begins[1]),
    }
    kernel = k.kernel("c/cmsis_nn_conv.c.j2", helpers=(CONV_HELPER,), **data)
    kernel.scratch["x_nhwc"] = n * c * h * wd
    kernel.scratch["y_nhwc"] = n * m * oh * ow
    kernel.scratch["buffer"] = max(data["buffer_bytes"], 1)
    return kernel


def _conv_buffer_bytes(depthwise: bool, c: int, kh: int, kw: int, stride_w: int, pad_w: int) -> int:
    """Room for CMSIS-NN's scratch (``*_get_buffer_size``) whichever way the library was built
    (plain C, DSP or MVE): the largest of its formulas. The generated code checks the library's
    own answer against it at run time."""
    if depthwise:
        return max(c * kh * kw * 2, 4 * 16 * kh * kw)
    cols = kh * kw * c
    aligned = (cols + 3) // 4 * 4
    return max(2 * aligned * 2, 4 * ((cols + 15) // 16) * 16, 2 * c * 2, (kw + pad_w + stride_w) * c * 2)
