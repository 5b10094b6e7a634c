"""Int8 convolutions and matrix products through CMSIS-NN (``--cmsis-nn``, ``--target c``).

An eligible QLinearConv calls ``arm_convolve_wrapper_s8`` or ``arm_depthwise_conv_wrapper_s8``
with its weights transposed at compile time (OHWI, or 1HWC for depthwise) and its activations
transposed around the call (NCHW to NHWC and back, in the node's scratch). An eligible
QLinearMatMul or QGemm with a constant matrix B calls ``arm_fully_connected_s8`` (one scale) or
``arm_fully_connected_per_channel_s8`` (one per column) on B transposed at compile time to
CMSIS-NN's [N][K]; A's rows and Y's are already where CMSIS-NN reads and writes them. The
requantization is CMSIS-NN's fixed point, which the portable kernels compute too in that mode,
so both give the same bits. ``conv_reason`` and ``fc_reason`` say why a node is not eligible; it
then keeps the portable kernel."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _quantize as qz
from ._conv_pool import pads_c, window

HELPER = "c/helpers/cmsis_nn.c.j2"
CH_IN_BLOCK_MVE = 124   # the input channels CMSIS-NN's Helium depthwise kernel takes at a time (its header's)


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
    kernel = k.kernel("c/cmsis_nn_conv.c.j2", helpers=(HELPER,), **data)
    kernel.scratch["x_nhwc"] = n * c * h * wd
    kernel.scratch["y_nhwc"] = n * m * oh * ow
    kernel.scratch["buffer"] = max(data["buffer_bytes"], 1)
    return kernel


def _conv_buffer_bytes(depthwise: bool, c: int, kh: int, kw: int, stride_w: int, pad_w: int) -> int:
    """Room for CMSIS-NN's scratch (``*_get_buffer_size``) whichever way the library was built
    (plain C, DSP or MVE): the largest of its formulas. The generated code checks the library's
    own answer against it at run time."""
    if depthwise:   # DSP: an int16 copy of the window; MVE: four blocks of CH_IN_BLOCK_MVE channels
        return max(c * kh * kw * 2, 4 * CH_IN_BLOCK_MVE * kh * kw)
    cols = kh * kw * c
    aligned = (cols + 3) // 4 * 4
    return max(2 * aligned * 2, 4 * ((cols + 15) // 16) * 16, 2 * c * 2, (kw + pad_w + stride_w) * c * 2)


# The matrix products CMSIS-NN's fully connected computes: their y_zero_point and bias inputs.
FC_INPUTS: dict[str, tuple[int, Optional[int]]] = {"QLinearMatMul": (7, None), "QGemm": (8, 6)}


def fc_reason(node: Node, k: KernelContext) -> Optional[str]:
    """Why CMSIS-NN cannot compute this QLinearMatMul or QGemm (None when it can)."""
    y_zero, bias = FC_INPUTS[node.op_type]
    a, b, y = k.input(0), k.input(3), k.out
    if y.dtype is dt.FLOAT:
        return "a float output (CMSIS-NN's fully connected gives int8)"
    if a.dtype is not dt.INT8 or b.dtype is not dt.INT8 or y.dtype is not dt.INT8:
        return "CMSIS-NN's int8 kernels take int8 A, B and Y (not uint8)"
    if b.rank != 2:
        return "B that is not a matrix"
    if node.attrs.get("transA", 0):
        return "a transposed A (CMSIS-NN reads A by rows)"
    if not all(isinstance(d, int) for d in (*a.dims, *b.dims, *y.dims)):
        return "dims known only at run time"
    if b.value is None:
        return "weights that are not constant"
    b_zero = k.input(5).value
    if b_zero is None or np.any(np.asarray(b_zero) != 0):
        return "weights with a nonzero zero point (CMSIS-NN's are symmetric)"
    if k.input(2).value is None or k.input(y_zero).value is None:
        return "zero points that are not constant"
    if bias is not None and k.has_input(bias):
        if k.input(bias).value is None:
            return "a bias that is not constant"
        if k.input(bias).numel not in (1, y.dims[-1]):
            return "a bias per output element (CMSIS-NN adds one per column)"
    return None


def fully_connected(node: Node, k: KernelContext, scale: Optional[qz.OutputScale]) -> tuple[Optional[Kernel], str]:
    """The call of CMSIS-NN's fully connected (c/cmsis_nn_fc.c.j2) for an eligible QLinearMatMul or
    QGemm, else None and the note of the portable kernel that computes it instead."""
    reason = fc_reason(node, k)
    if reason is not None:
        return None, f"portable kernel, not CMSIS-NN: {reason}"
    assert scale is not None and scale.multiplier is not None and scale.shift is not None, \
        "internal: --cmsis-nn requantizes in fixed point"
    y_zero_input, bias_input = FC_INPUTS[node.op_type]
    a, b, y = k.input(0), k.input(3), k.out
    n, depth = y.dims[-1], a.dims[-1]
    weights = np.asarray(b.value, np.int8)
    if not node.attrs.get("transB", 0):   # B is [K][N]; CMSIS-NN reads one row of K per output column
        weights = weights.T
    bias = None
    if bias_input is not None and k.has_input(bias_input):
        values = np.asarray(k.input(bias_input).value, np.int32).reshape(-1)
        bias = k.constant("cmsis_bias", np.ascontiguousarray(np.broadcast_to(values, (n,))))
    per_channel = k.constants[scale.multiplier].size != 1
    data = {
        "per_channel": per_channel, "rows": int(np.prod(y.dims[:-1], dtype=np.int64)), "K": depth, "N": n,
        "a": a.name, "y": y.name, "a_zero": int(np.asarray(k.input(2).value).reshape(-1)[0]),
        "y_zero": int(np.asarray(k.input(y_zero_input).value).reshape(-1)[0]),
        "weights": k.constant("cmsis_weights", np.ascontiguousarray(weights)), "bias": bias,
        "multiplier": scale.multiplier, "shift": scale.shift,
        # arm_fully_connected_s8_get_buffer_size: no scratch for plain C and DSP code; Helium's
        # kernels start from each output's weight sum times A's offset plus the bias (int32).
        "buffer_bytes": 4 * n,
    }
    kernel = k.kernel("c/cmsis_nn_fc.c.j2", helpers=(HELPER,), **data)
    kernel.scratch["buffer"] = data["buffer_bytes"]
    kernel.note = "CMSIS-NN " + ("arm_fully_connected_per_channel_s8" if per_channel else "arm_fully_connected_s8")
    return kernel, ""
