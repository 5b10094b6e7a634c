from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ...codegen import cexpr
from ...codegen.cexpr import CExpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.memory import thread_part
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _gemm, _winograd
from ._conv_pool import Window, affine, axes_data, conv_shape, flat_index, negate, pads_c, per_group, row_offset, window
from ._elementwise import check_dtype
from ._phase_planes import phase_planes, static_but_batch
from .registry import InferContext, OpDef, register

COL_ELEMENTS = 1 << 17      # im2col buffer size to aim for (elements)
# ... but at least this many output columns per band (the GEMM's N): each band streams all the
# weights once, so narrow bands of a deep kernel (3x3 over 256+ channels) re-read megabytes.
COL_MIN_WIDTH = 512
# ... unless the weights are at most this many bytes: then a map of fewer bands than threads is
# split into a band per thread (each reads the weights once more, from cache).
NARROW_BAND_WEIGHT_BYTES = 1 << 19
SMALL_COL_ELEMENTS = 1 << 12   # Target.small_memory: 16 KiB of float columns ...
SMALL_COL_MIN_WIDTH = 32       # ... or 32 outputs
# ONNXC_PARALLEL_MIN_MACS of the generated runtime: smaller GEMMs and convolutions stay on one thread.
PARALLEL_MIN_MACS = 1 << 21


@register("Conv", since=1)
class Conv(OpDef):
    """Y = conv(X, W) + B: N-D convolution with groups, strides, dilations and padding."""

    def infer(self, node: Node, ctx: InferContext):
        x, w = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        for i in (1, 2):
            if ctx.has(i) and ctx.inp(i).dtype != x.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from X type {x.dtype}")
        shape = conv_shape(node, ctx.dims, x.shape, w.shape, ctx.fail)
        if ctx.has(2):
            b = ctx.inp(2).shape
            if len(b) != 1 or (isinstance(b[0], int) and isinstance(shape[1], int) and b[0] != shape[1]):
                raise ctx.fail(f"B must be a vector of the {shape[1]} output channels, got shape {list(b)}")
        return [(x.dtype, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        return conv_kernel(node, k, **self.conv_args(node, k))

    @staticmethod
    def conv_args(node: Node, k: KernelContext) -> dict[str, Any]:
        x, w = k.input(0), k.input(1)
        native = _gemm.native(x.dtype)
        mg = per_group(w.dims[0], node.attrs.get("group", 1))
        bias = k.input(2).load(f"g * {cexpr.lit(mg)} + m") if k.has_input(2) else "0"
        checks = []
        if k.has_input(2) and k.input(2).dims[0] != w.dims[0]:
            checks.append({"cond": f"{cexpr.lit(k.input(2).dims[0])} != {cexpr.lit(w.dims[0])}",
                           "msg": c_string("Conv: B does not have one value per output channel")})
        return {"g": _gemm.gemm_type(x.dtype), "x_load": x.dtype.load, "x_native": native,
                "w_load": None if native else w.load("m * {K} + i"), "bias": bias,
                "y_store": None if native else k.out.store("acc[i]"), "checks": checks,
                "bias_ptr": f"{k.input(2).name} + g * {cexpr.lit(mg)}" if k.has_input(2) else "NULL"}


def conv_kernel(node: Node, k: KernelContext, g: _gemm.GemmType, *, x_load: str, x_native: bool,
                w_load: Optional[str], bias: str, y_store: Optional[str],
                checks: Sequence[dict[str, str]] = (), bias_ptr: str = "NULL",
                epilogue: Optional[dict[str, Any]] = None) -> Kernel:
    """The ``c/conv.c.j2`` kernel of Conv and ConvInteger.

    x_load: format string converting an X element to the GEMM type; x_native: X is already
    that type; w_load: expression (of m and i, ``{K}`` for the row length) filling a converted
    copy of W, or None to use W as is; bias: expression of g and m; y_store: expression of
    ``acc[i]`` storing a GEMM-type result to Y, or None to accumulate into Y directly.
    float32 Conv takes the epilogue GEMM (c/helpers/sgemm.c.j2): bias_ptr (a C pointer to this
    group's biases, or NULL) and ``epilogue`` (act, alpha, beta, residual: an input name or
    None) are applied to each output tile; constant weights are packed at compile time for
    the target's micro-kernel when ``k.target.prepack``.
    """
    x, w, y = k.input(0), k.input(1), k.out
    group = node.attrs.get("group", 1)
    rank = x.rank - 2
    win = window(node, rank, w.shape[2:], k.unsupported)
    in_dims, out_dims = x.dims[2:], y.dims[2:]
    begins, ends = pads_c(win, in_dims, out_dims)
    n, c, m = x.dims[0], x.dims[1], w.dims[0]
    cg, mg = w.dims[1], per_group(m, group)
    kp = cexpr.prod(win.kernel)
    kk = cexpr.mul(cg, kp)
    size_in, size_out = cexpr.prod(in_dims), cexpr.prod(out_dims)
    direct = x_native and all(v == 1 for v in win.kernel + win.strides) and all(p == 0 for p in begins + ends)
    depthwise = not direct and cg == 1 and mg == 1
    checks = list(checks)
    if c != cexpr.mul(cg, group):
        checks.append({"cond": f"{cexpr.lit(c)} != {cexpr.lit(cexpr.mul(cg, group))}",
                       "msg": c_string(f"{node.op_type}: X channels differ from W channels times group")})
    axes = axes_data(win, in_dims, out_dims, begins)
    for a, axis in enumerate(axes):
        # input position of output o{a} (outer axes) or the shift of o * stride (last axis)
        o_term = [(f"o{a}", win.strides[a])] if a < rank - 1 else []
        axis["pos"] = affine(*o_term, (f"k{a}", win.dilations[a]), const=negate(begins[a]))
    # A 2-D "same" convolution of stride 1 (output rows as long as the input's): a tap's rows of
    # col are one shifted run of X's rows, copied in one loop, then the columns the shift
    # brought in from a neighbouring row are zeroed (a 3x3 Conv of 32 channels on an 8x8 map:
    # im2col row by row took as long as a third of its GEMM).
    shifted_rows = _same_rows(win, in_dims, out_dims)
    # col holds `rows` outputs of the first spatial axis at a time, about COL_ELEMENTS values
    # (or COL_MIN_WIDTH outputs); a fraction of that on a small-memory target.
    col_elements, col_min_width = (SMALL_COL_ELEMENTS, SMALL_COL_MIN_WIDTH) if k.target.small_memory \
        else (COL_ELEMENTS, COL_MIN_WIDTH)
    inner = cexpr.prod(out_dims[1:])
    if rank == 1:
        rows, width = 1, size_out
    elif isinstance(kk, int) and isinstance(inner, int):
        rows = max(1, col_elements // max(1, kk * inner), -(-col_min_width // max(1, inner)))
        if isinstance(out_dims[0], int):
            rows = balanced_rows(min(rows, out_dims[0]), out_dims[0], inner, k.target.threads)
            threads = k.target.threads
            if threads > 1 and -(-out_dims[0] // rows) < threads <= out_dims[0] and isinstance(mg, int) \
                    and isinstance(kk, int) and mg * kk * 4 <= NARROW_BAND_WEIGHT_BYTES:
                # one band per thread, each thread's im2col rows read by its own GEMM: one band's
                # im2col, split by rows, left half of the GEMM's B in the other core's cache (a
                # 1x1 stride-2 Conv of 256 -> 128 channels on 28 x 28 at 2 threads: 0.090 ms, at
                # 1 thread 0.101), while the weights re-read per band are few
                rows = -(-out_dims[0] // threads)
        width = cexpr.mul(rows, inner)
    else:
        rows = cexpr.call("onnxc_dim_max", 1,
                          cexpr.div(col_elements, cexpr.mul(kk, cexpr.call("onnxc_dim_max", 1, inner))))
        width = cexpr.mul(rows, inner)
    cast = "" if g.ctype == w.ctype else f"(const {g.ctype} *)"
    sgemm = g is _gemm.FLOAT and x.dtype is dt.FLOAT and w_load is None and y_store is None
    if epilogue is not None and not sgemm:
        raise k.unsupported("fused epilogues need float32 tensors")
    epilogue = epilogue or {"act": "ONNXC_ACT_NONE", "alpha": "0.0f", "beta": "0.0f", "residual": None}
    fused = epilogue["act"] != "ONNXC_ACT_NONE" or epilogue["residual"] is not None
    prologue = epilogue.get("prologue")
    if prologue is not None:
        # (fuse_conv_prologue makes these only where the GEMM reads X as it is: see there)
        if not (sgemm and direct and group == 1 and k.target.prepack and w.value is not None):
            raise k.unsupported("a prologue needs a float32 1x1 Conv of one group, stride 1, no padding, "
                                "constant weights, packed")
        return _prologue_direct(k, checks, epilogue, prologue)
    if sgemm and depthwise:
        kernel = _depthwise_2d(k, win, begins, checks, epilogue, fused)
        if kernel is not None:
            return kernel
    # (conv_direct: small ones, and large kernels of stride 1, without im2col and the GEMM)
    if sgemm and not depthwise and group == 1 and k.target.direct_conv and w.value is not None \
            and _direct_wins(win, w.dims, out_dims, in_dims):
        kernel = _grouped_2d(k, win, begins, checks, epilogue, group, fused)
        if kernel is not None:
            return kernel
    if sgemm and not depthwise and k.target.prepack and k.target.winograd and w.value is not None and group == 1:
        kernel = _winograd_2d(k, win, begins, checks, epilogue)
        if kernel is not None:
            return kernel
    if sgemm and direct and group == 1 and k.target.prepack and w.value is not None and size_out == 1 \
            and isinstance(kk, int) and isinstance(m, int):
        return _one_pixel_pointwise(k, checks, epilogue)
    if sgemm and not depthwise and group == 1 and k.target.prepack and w.value is not None:
        kernel = _small_map(k, win, begins, checks, epilogue)
        if kernel is not None:
            return kernel
    if sgemm and not depthwise and group > 1 and k.target.prepack and w.value is not None:
        kernel = _grouped_2d(k, win, begins, checks, epilogue, group, fused)
        if kernel is not None:
            return kernel
    packed = None
    mr = k.target.gemm_mr
    if sgemm and not depthwise and k.target.prepack and w.value is not None and all(
            isinstance(d, int) for d in (mg, kk)):
        groups = np.asarray(w.value, np.float32).reshape(group, mg, kk)
        packed = k.constant("W_packed", np.concatenate([_gemm.pack_rows(a, mr) for a in groups]))
    if packed is not None:
        kernel = _gathered_2d(k, win, begins, checks, epilogue, packed, group, bias_ptr)
        if kernel is not None:
            return kernel
    data = {
        "checks": checks, "ct": g.ctype, "xt": x.ctype, "yt": y.ctype, "gemm": g.fn,
        "N": cexpr.lit(n), "C": cexpr.lit(c), "M": cexpr.lit(m), "G": group, "Cg": cexpr.lit(cg),
        "Mg": cexpr.lit(mg), "K": cexpr.lit(kk), "IN": cexpr.lit(size_in), "OUT": cexpr.lit(size_out),
        "axes": axes, "direct": direct, "depthwise": depthwise,
        "x_load": x_load, "x_ptr": x.name,
        "w_load": w_load.format(K=cexpr.lit(kk)) if w_load else None,
        "w_ptr": cast + w.name,
        "bias": bias, "y_store": y_store,
        "y_ptr": f"({g.ctype} *){y.name}" if y_store is None and g.ctype != y.ctype else y.name,
        "row_index": flat_index(["c"] + [f"k{a}" for a in range(rank)], [cg] + list(win.kernel)),
        "dst_offset": row_offset(["(o0 - first)"] + [f"o{a}" for a in range(1, rank - 1)], out_dims),
        "src_offset": row_offset([f"i{a}" for a in range(rank - 1)], in_dims),
        "rows": cexpr.lit(rows), "inner": cexpr.lit(inner), "shifted_rows": shifted_rows,
        "row_shift": affine(("k0", win.dilations[0]), const=negate(begins[0])) if rank == 2 else "0",
        "full_dst_offset": row_offset([f"o{a}" for a in range(rank - 1)], out_dims),
        "kernel_index": flat_index([f"k{a}" for a in range(rank)], win.kernel),
        "sgemm": sgemm, "packed": packed, "Mgp": cexpr.lit(-(-mg // mr) * mr) if packed else "0",
        "bias_ptr": bias_ptr, "epi": epilogue, "fused": fused,
        "residual": f"{epilogue['residual']} + (n * {cexpr.lit(m)} + g * {cexpr.lit(mg)}) * {cexpr.lit(size_out)}"
                    if epilogue["residual"] else None,
    }
    # Groups (and images) whose GEMMs are too small to split among the threads run side by side.
    groups_parallel = None
    if sgemm and not depthwise and k.target.threads > 1 and (group > 1 or n != 1):
        macs = cexpr.lit(cexpr.mul(mg, size_out, kk))
        groups_parallel = (f"{cexpr.lit(cexpr.mul(n, group))} > 1 && {macs} < ONNXC_PARALLEL_MIN_MACS"
                           f" && {cexpr.lit(cexpr.mul(n, group))} * {macs} >= ONNXC_PARALLEL_MIN_MACS")
    data["groups_parallel"] = groups_parallel
    # Bands of rows of one image and group run side by side where there are enough of them.
    bands_parallel = None
    if sgemm and not (direct or depthwise) and k.target.threads > 1 and rank > 1 and isinstance(rows, int) \
            and isinstance(out_dims[0], int) and -(-out_dims[0] // rows) >= k.target.threads:
        macs = cexpr.lit(cexpr.mul(mg, size_out, kk))
        bands_parallel = f"{macs} >= ONNXC_PARALLEL_MIN_MACS" + (" && !groups_parallel" if groups_parallel else "")
    data["bands_parallel"] = bands_parallel
    data["WIDTH"] = cexpr.lit(width)
    helpers = g.helpers if not depthwise or (sgemm and fused) else ()
    kernel = k.kernel("c/conv.c.j2", helpers=helpers, **data)
    if w_load:
        kernel.scratch["w"] = cexpr.mul(m, kk, g.size)
    if not (direct or depthwise):
        kernel.scratch["col"] = cexpr.mul(kk, width, g.size, k.target.threads if groups_parallel or bands_parallel else 1)
    if y_store:
        kernel.scratch["acc"] = cexpr.mul(mg, size_out, g.size)
    if not depthwise:
        kernel.scratch["pack"] = _gemm.pack_bytes(g, mg, size_out if direct else width, kk,
                                                  few_rows_unpacked=packed is None, target=k.target)
    return kernel


def _prologue_direct(k: KernelContext, checks: Sequence[dict[str, str]], epilogue: dict[str, Any],
                     prologue: dict[str, Any]) -> Kernel:
    """The ``c/conv_prologue.c.j2`` kernel: a float32 1x1 Conv (one group, stride 1, no padding)
    of act(X * scale + shift), per input channel, with the scale, shift and ReLU applied as the
    GEMM packs X (onnxc_gather), so that the activated input is never stored."""
    x, w, y = k.input(0), k.input(1), k.out
    n, c, m = x.dims[0], x.dims[1], w.dims[0]
    size = cexpr.prod(x.dims[2:])
    mr = k.target.gemm_mr
    weights = np.asarray(w.value, np.float32).reshape(w.dims[0], -1)
    data = {"checks": list(checks), "N": cexpr.lit(n), "C": cexpr.lit(c), "M": cexpr.lit(m),
            "SIZE": cexpr.lit(size), "x_ptr": x.name, "y_ptr": y.name,
            "bias_ptr": k.input(2).name if k.has_input(2) else "NULL",
            "packed": k.constant("W_packed", _gemm.pack_rows(weights, mr)), "epi": epilogue,
            "residual": epilogue["residual"], "scale": prologue["scale"], "shift": prologue["shift"],
            "relu": prologue["relu"]}
    kernel = k.kernel("c/conv_prologue.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, m, size, c, few_rows_unpacked=False, target=k.target)
    return kernel


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def balanced_rows(rows: int, total: int, inner: int, threads: int) -> int:
    """Output rows per im2col band, near ``rows``, such that the bands split evenly among the
    threads: of the band counts that are multiples of ``threads`` (and keep bands at least
    half of COL_MIN_WIDTH wide), the one whose busiest thread has the fewest rows."""
    def busiest(height: int) -> int:   # rows of the thread with the most bands (at most)
        return _ceil_div(_ceil_div(total, height), threads) * height

    if threads <= 1 or _ceil_div(total, rows) < threads:
        return rows
    best = (busiest(rows), -rows)
    first = _ceil_div(_ceil_div(total, rows), threads) * threads
    for count in range(first, first + 2 * threads + 1, threads):
        height = _ceil_div(total, count)
        if height * inner * 2 < COL_MIN_WIDTH:
            break
        best = min(best, (busiest(height), -height))   # ties: the taller bands
    return -best[1]


# The gathered GEMM packs each block of B from up to KC rows of planes at once: that beats
# im2col's sequential pass only while the planes stay in cache (half of a 512 KiB L2), and
# where every NR-column panel lies inside one output row (width a multiple of NR), so that a
# panel is one vector copy. Measured against im2col at 1 thread: 0.88 of its time on the
# tiny CNN (planes of 14-20 KiB); 1.03-1.08 (up to 1.28 at 2 threads) on YOLO and VGG-19
# (megabytes of planes) and on SqueezeNet and Inception-v2 (rows of 13-56 columns, in pieces).
GATHER_PLANES_BYTES = 1 << 18
# ... and a network's first convolution by a wide kernel, of an image's few channels, whatever
# its map's size and width: im2col would write 49 taps a channel out and the GEMM copy them
# again (a 7x7 stride-2 Conv of 3 channels at 224x224: 1.87 -> 1.66 ms at 1 thread, 1.00 ->
# 0.91 at 2, Sapphire Rapids); its planes are about the size of the image. A 3x3 kernel's 27
# rows stay with im2col: 3 -> 32 channels stride 2 at 640x640 took 2.10 ms by im2col, 2.38 gathered.
GATHER_IMAGE_CHANNELS = 4
GATHER_IMAGE_TAPS = 49
GATHER_IMAGE_BYTES = 1 << 24

MAX_DEPTHWISE_TAPS = 64     # kernel taps the depthwise kernel unrolls (7x7 is 49)
# Output rows the depthwise kernel computes together (kernels of up to 25 taps; 2 above):
# 4 accumulators and the weights fit the 16 vector registers of AVX2 for 3x3.
DEPTHWISE_BLOCK_ROWS = 4
# Outputs a fused epilogue (residual, activation) of the depthwise kernel takes at a time: a 7x7
# map's 49 values one channel at a time leave the vector activations waiting on their latency.
EPILOGUE_SPAN = 512


# Activations the depthwise kernel applies as it stores rows straight into Y (rows of whole
# vectors, no residual): a select or two in the row's vector loop, the same expressions as the
# epilogue's, instead of a second pass over the channel's outputs (16 channels of 112 x 112,
# 3 x 3, ReLU, one thread: 77-79 -> 67-69 us; clang, which does not vectorize the loop with them,
# applies them to each block of rows after it). Small maps keep the pass over spans of channels.
# {v}: the sum, {a}, {b}: the epilogue's alpha and beta.
_HARD_SIGMOID = "(({a} * {v} + {b}) < 0.0f ? 0.0f : (({a} * {v} + {b}) > 1.0f ? 1.0f : ({a} * {v} + {b})))"
INLINE_ACTS = {
    "ONNXC_ACT_RELU": "({v} > 0.0f ? {v} : 0.0f)",
    "ONNXC_ACT_CLIP": "({v} < {a} ? {a} : ({v} > {b} ? {b} : {v}))",
    "ONNXC_ACT_LEAKY_RELU": "({v} >= 0.0f ? {v} : {v} * {a})",
    "ONNXC_ACT_HARD_SIGMOID": _HARD_SIGMOID,
    "ONNXC_ACT_HARD_SWISH": "({v} * " + _HARD_SIGMOID + ")",
}


def _depthwise_2d(k: KernelContext, win: Window, begins: Sequence[CExpr], checks: list[dict[str, str]],
                  epilogue: dict[str, Any], fused: bool) -> Optional[Kernel]:
    """The ``c/conv_depthwise.c.j2`` kernel of a float32 2-D depthwise Conv with static sizes
    and pads of at least 0, or None where it does not apply (the generic loops run then)."""
    x, w, y = k.input(0), k.input(1), k.out
    if win.rank != 2 or not static_but_batch(k.target, x.dims, y.dims, begins) or min(begins) < 0:
        return None
    if cexpr.prod(win.kernel) > MAX_DEPTHWISE_TAPS:
        return None
    n, c = x.dims[:2]
    pp = phase_planes(x.dims[2:], y.dims[2:], win.kernel, win.strides, win.dilations, begins)
    rows = min(pp.OH, DEPTHWISE_BLOCK_ROWS if len(pp.taps) <= 25 else 2)
    # Rows of a whole number of 8-float vectors (16 or more) are computed straight into Y; the
    # others a whole number of vectors at a time into a row buffer, the lanes past OW dropped.
    direct = pp.OW >= 16 and pp.OW % 8 == 0
    xv = pp.OW if direct else _ceil_div(pp.OW, 8) * 8 if pp.OW <= 8 else _ceil_div(pp.OW, 16) * 16
    rs = pp.OW if direct else max(pp.QW, xv)   # the rows' stride
    planes = pp.floats + max(0, xv - pp.QW)   # (the last row's vector lanes past OW read this far)
    stride = thread_part(planes + (0 if direct else pp.OH * rs), 4)  # one thread's planes and row buffer
    inline = INLINE_ACTS.get(epilogue["act"]) if fused and direct and not epilogue["residual"] else None
    if inline is not None:
        fused = False
    # Channels per block: a fused epilogue runs over a block's outputs at once.
    cb = max(1, -(-EPILOGUE_SPAN // (pp.OH * pp.OW))) if fused else 1
    data = {
        **pp.template_data(), "pp": pp.template_data(), "R": rows, "XV": xv, "RS": rs, "PLANES": planes,
        "checks": checks, "NC": cexpr.mul(n, c), "C": c, "STRIDE": stride, "taps": pp.taps,
        "threads": k.target.threads, "x_ptr": x.name, "y_ptr": y.name, "w_ptr": w.name,
        "bias": f"{k.input(2).name}[c]" if k.has_input(2) else "0.0f",
        "epi": epilogue, "fused": fused, "residual": epilogue["residual"],
        "direct": direct, "CB": cb, "blocks": cexpr.div(cexpr.add(cexpr.mul(n, c), cb - 1), cb),
        "store": (inline or "{v}").replace("{a}", epilogue["alpha"]).replace("{b}", epilogue["beta"]),
    }
    kernel = k.kernel("c/conv_depthwise.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["plane"] = cexpr.mul(k.target.threads, stride, 4)
    return kernel


def _one_pixel_pointwise(k: KernelContext, checks: list[dict[str, str]], epilogue: dict[str, Any]) -> Kernel:
    """The ``c/conv_one_pixel.c.j2`` kernel of a float32 1x1 Conv of a 1x1 map with constant
    weights (a squeeze-and-excitation block's layers): the images as the rows of one GEMM,
    Y (N x M) = X (N x C) W^T, W^T packed at compile time as the GEMM's B. One image is then a
    matrix-vector product that streams the weights once, where the convolution's GEMM (W times
    a 1-column X) would fill a whole micro-kernel tile per output."""
    x, w, y = k.input(0), k.input(1), k.out
    n, c, m = x.dims[0], x.dims[1], w.dims[0]
    weights = np.asarray(w.value, np.float32).reshape(m, c)
    packed = k.constant("W_columns", _gemm.pack_cols(np.ascontiguousarray(weights.T), k.target.gemm_nr))
    data = {"checks": checks, "N": cexpr.lit(n), "M": m, "K": c, "packed": packed, "x_ptr": x.name,
            "y_ptr": y.name, "bias_ptr": k.input(2).name if k.has_input(2) else "NULL", "epi": epilogue,
            "residual": epilogue["residual"]}
    kernel = k.kernel("c/conv_one_pixel.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, n, m, c, few_rows_unpacked=True, target=k.target)
    return kernel


# Output positions of a small map per GEMM row block: images are stacked until their
# positions fill about this many rows of Y^T (a few micro-kernel row panels).
SMALL_MAP_ROWS = 96
SMALL_MAP_PATCH_FLOATS = 1 << 18
SMALL_MAP_TABLE = 1 << 14     # entries of the positions-by-taps offset table, at most
SMALL_MAP_WIDE = 512          # output channels from which a 1x1 Conv of a small map takes the kernel too (1 thread)
SMALL_MAP_BACK_ROWS = 16       # output channels a thread writes back to Y's layout (and its residual) at a time
SMALL_MAP_SHARED_WEIGHTS = 1 << 19   # bytes of W^T that every thread may read whole (a block's rows split)


def _small_map(k: KernelContext, win: Window, begins: Sequence[CExpr], checks: list[dict[str, str]],
               epilogue: dict[str, Any]) -> Optional[Kernel]:
    """The ``c/conv_small_map.c.j2`` kernel of a float32 Conv (any rank, one group, constant
    weights, static sizes but the batch, pads of at least 0) whose output maps have fewer
    positions than half the GEMM tile's width: the GEMM over positions (W times im2col) would
    compute mostly padding in every tile (a 4-position map fills 4 of a tile's 32 columns on
    AVX-512). The images' positions become the rows instead, Y^T = patches W^T, with W^T packed
    at compile time as the GEMM's B and the output channels as its columns: images are stacked
    until their positions fill SMALL_MAP_ROWS rows, and each block is written back to Y's
    layout. None where it does not apply."""
    x, w, y = k.input(0), k.input(1), k.out
    if not static_but_batch(k.target, x.dims, y.dims, w.dims, begins) or min(begins) < 0:
        return None
    in_dims, out_dims = list(x.dims[2:]), list(y.dims[2:])
    positions = int(np.prod(out_dims, dtype=np.int64))
    # Where W times im2col would leave an eighth of its columns padding (49 positions: 64; 81:
    # 96, the 9x9 regions of DeepLabV3's dilated ASPP convolutions, 960 -> 256 channels: 3.36 ->
    # 3.04 ms at 1 thread, 1.87 -> 1.92 at 2; 256 channels 3x3 on 9x9: 0.55 / 0.38 -> 0.55 /
    # 0.35, Sapphire Rapids, the fastest of a noisy machine's 25 runs), and
    # the patches cost no more than im2col would (not a 1x1 kernel, which reads X as it is,
    # unless it has many output channels and one thread: then W^T's panels are what the GEMM
    # streams, and each row of patches meets them all; 160 -> 960 channels on 7 x 7: 0.126 ->
    # 0.116 ms, 2048 -> 512: 0.80 -> 0.76, but 960 -> 160: 0.124 -> 0.129, Sapphire Rapids; at 2
    # threads 2048 -> 512 went 0.42 -> 0.46); any map of under half a tile's width
    padded = -(-positions // k.target.gemm_nr) * k.target.gemm_nr
    wide = k.target.threads == 1 and isinstance(w.dims[0], int) and w.dims[0] >= SMALL_MAP_WIDE
    wasteful = positions <= SMALL_MAP_ROWS and (padded - positions) * 8 >= padded \
        and (any(v != 1 for v in win.kernel) or wide)
    if (positions * 2 > k.target.gemm_nr and not wasteful) or (positions == 1 and all(v == 1 for v in win.kernel)):
        return None
    n, c, m = x.dims[0], x.dims[1], w.dims[0]
    taps = int(np.prod(win.kernel, dtype=np.int64))
    kk = c * taps
    # src[o][t]: offset, within an input channel, of the value tap t of output position o
    # reads (-1: padding)
    in_strides = [int(np.prod(in_dims[a + 1:], dtype=np.int64)) for a in range(win.rank)]
    src = []
    for o in np.ndindex(*out_dims):
        row = []
        for t in np.ndindex(*win.kernel):
            pos = [o[a] * win.strides[a] + t[a] * win.dilations[a] - begins[a] for a in range(win.rank)]
            inside = all(0 <= p < d for p, d in zip(pos, in_dims))
            row.append(sum(p * s for p, s in zip(pos, in_strides)) if inside else -1)
        src.append(row)
    in_size = int(np.prod(in_dims, dtype=np.int64))
    if in_size >= 2 ** 31 or positions * taps > SMALL_MAP_TABLE:
        return None
    # (and the patches of a block within about a megabyte, whatever the channels)
    images = max(1, min(SMALL_MAP_ROWS // positions, SMALL_MAP_PATCH_FLOATS // (positions * kk)))
    if isinstance(n, int):
        images = min(images, n)
    if images * c * in_size >= 2 ** 31:
        return None
    rows = images * positions
    # The patches are written as the GEMM's packed A, panels of MR rows: reads[p][t][lane], the
    # offset in a block's images (of the same channel) of the value tap t of the panel's row
    # `lane` (image i, position o) reads, -1 for padding and for rows past the block's.
    mr = k.target.gemm_mr
    panels = -(-rows // mr)
    reads = np.full((panels, taps, mr), -1, np.int64)
    for r in range(rows):
        i, o = divmod(r, positions)
        reads[r // mr, :, r % mr] = [i * c * in_size + v if v >= 0 else -1 for v in src[o]]
    weights = np.asarray(w.value, np.float32).reshape(m, kk)
    packed = k.constant("W_columns", _gemm.pack_cols(np.ascontiguousarray(weights.T), k.target.gemm_nr))
    data = {"checks": checks, "N": cexpr.lit(n), "C": c, "M": m, "K": kk, "S": positions, "T": taps,
            "IN": in_size, "NB": images, "reads": reads.reshape(panels, -1).tolist(), "packed": packed,
            "x_ptr": x.name, "y_ptr": y.name, "bias_ptr": k.input(2).name if k.has_input(2) else "NULL",
            "epi": epilogue, "residual": epilogue["residual"], "MB": SMALL_MAP_BACK_ROWS,
            "MBLOCKS": -(-m // SMALL_MAP_BACK_ROWS), "MR": mr,
            # Threads: a block runs as whole panels of rows on each thread, in one region, where
            # the GEMM would split its rows anyway (fewer column panels than threads) or each
            # thread may read all of W^T (SMALL_MAP_SHARED_WEIGHTS bytes at most): 128 -> 64
            # channels 3x3 on 7 x 7 at 2 threads 0.061 -> 0.043 ms with onnxruntime's 0.042 (1
            # thread: 0.065), Sapphire Rapids; where W^T is larger, the GEMM's column split has
            # each thread stream only its part (DeepLabV3's 960 -> 256 on 9 x 9: 8.8 MB)
            "panel_split": k.target.threads > 1 and (-(-m // k.target.gemm_nr) < k.target.threads
                                                     or m * kk * 4 <= SMALL_MAP_SHARED_WEIGHTS)}
    kernel = k.kernel("c/conv_small_map.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["patches"] = -(-rows // mr) * mr * kk * 4
    kernel.scratch["product"] = rows * m * 4
    kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, rows, m, kk, few_rows_unpacked=True, target=k.target)
    return kernel


def _gathered_2d(k: KernelContext, win: Window, begins: Sequence[CExpr], checks: list[dict[str, str]],
                 epilogue: dict[str, Any], packed: str, group: int, bias_ptr: str) -> Optional[Kernel]:
    """The ``c/conv_gather.c.j2`` kernel of a float32 2-D Conv with W packed, static sizes and
    pads of at least 0: B of the GEMM is gathered from phase planes of the input as it is
    packed, with no im2col copy. None where it does not apply (im2col runs then)."""
    x, w, y = k.input(0), k.input(1), k.out
    if win.rank != 2 or not static_but_batch(k.target, x.dims, y.dims, w.dims, begins) or min(begins) < 0:
        return None
    n, c = x.dims[:2]
    m, cg = w.dims[:2]
    mg, mr = m // group, k.target.gemm_mr
    pp = phase_planes(x.dims[2:], y.dims[2:], win.kernel, win.strides, win.dilations, begins)
    plane_bytes = c * pp.floats * 4
    image = c <= GATHER_IMAGE_CHANNELS and len(pp.taps) >= GATHER_IMAGE_TAPS and plane_bytes <= GATHER_IMAGE_BYTES
    if not image and (pp.OW % k.target.gemm_nr != 0 or plane_bytes > GATHER_PLANES_BYTES):
        return None
    out = pp.OH * pp.OW
    kk = cg * len(pp.taps)
    data = {
        "pp": pp.template_data(), "H": pp.H, "W": pp.W, "OW": pp.OW, "QW": pp.QW, "PLANE": pp.floats,
        "taps": pp.taps, "checks": checks, "N": n, "C": c, "G": group, "Cg": cg, "M": m, "Mg": mg,
        "Mgp": -(-mg // mr) * mr, "K": kk, "OUT": out, "packed": packed, "bias_ptr": bias_ptr,
        "x_ptr": x.name, "y_ptr": y.name, "epi": epilogue, "residual": epilogue["residual"],
    }
    kernel = k.kernel("c/conv_gather.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["plane"] = c * pp.floats * 4
    kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, mg, out, kk, few_rows_unpacked=False,
                                              target=k.target)
    return kernel


# Grouped convolutions computed directly (c/conv_grouped.c.j2): output channels in blocks of 16
# (targets with 32 vector registers) or 8 per group, at most this many input channels a group
# (beyond, a group's GEMM has enough depth for im2col and the micro-kernel).
GROUPED_MAX_CG = 64
GROUPED_MAX_LANES = 16   # floats of the widest vector the kernel may be compiled for (AVX-512)


# A one-group Conv takes the direct kernel too (c/conv_grouped.c.j2, with input channels a
# block as above) where it is small, so that im2col's copy and the GEMM's packing of a few
# panels cost more than the products (at most DIRECT_MAX_MACS multiply-adds, or
# DIRECT_SMALL_MAP_MACS on maps of at most DIRECT_SMALL_MAP positions), or where its kernel is
# large and of stride 1 (at least DIRECT_MIN_TAPS taps, rows as long as the input's): im2col
# copies every input value once a tap, and Winograd is for 3x3 only. Measured at one thread
# against im2col or Winograd (Sapphire Rapids): 16 -> 32 channels 3x3 on 16 x 16 0.67, 32 -> 64
# on 8 x 8 0.78, 32 -> 64 on 16 x 16 0.92, 64 -> 128 on 8 x 8 0.87, but 64 -> 64 on 14 x 14 1.27
# and 32 -> 64 on 32 x 32 1.62 (Winograd's); 5x5 16 -> 16 channels on 64 x 64 0.49, 64 -> 64 on
# 32 x 32 0.70, 7x7 16 -> 16 on 32 x 32 0.64.
DIRECT_MAX_MACS = 3 << 20
DIRECT_SMALL_MAP_MACS = 6 << 20
DIRECT_SMALL_MAP = 256
DIRECT_MIN_TAPS = 25


def _same_rows(win: Window, in_dims: Sequence[CExpr], out_dims: Sequence[CExpr]) -> bool:
    """A 2-D window of stride 1 whose output rows are as long as the input's (a "same"
    convolution, dilated or not): a tap reads a row shifted by a fixed offset."""
    return win.rank == 2 and win.strides == (1, 1) and out_dims[1] == in_dims[1]


def _direct_wins(win: Window, w_dims: Sequence[CExpr], out_dims: Sequence[CExpr], in_dims: Sequence[CExpr]) -> bool:
    """Whether a one-group 2-D Conv of these sizes is faster computed directly than by im2col
    or Winograd and the GEMM (the kernel itself may still decline it)."""
    if win.rank != 2 or not all(isinstance(d, int) for d in (*w_dims, *out_dims, *in_dims)):
        return False
    positions = int(out_dims[0]) * int(out_dims[1])
    if positions < GROUPED_MAX_LANES or all(k == 1 for k in win.kernel):
        return False   # (its vectors run over the positions: the small-map and one-pixel kernels';
        # a 1x1 kernel's GEMM reads X as it is, with no im2col: SqueezeNet's 1x1 expand layers
        # computed directly took the model 4.61 -> 4.71 ms at one thread, 2.95 -> 3.12 at two)
    macs = int(np.prod(w_dims, dtype=np.int64)) * positions
    same = _same_rows(win, in_dims, out_dims)
    return macs <= DIRECT_MAX_MACS or (same and positions <= DIRECT_SMALL_MAP and macs <= DIRECT_SMALL_MAP_MACS) \
        or (same and int(np.prod(win.kernel)) >= DIRECT_MIN_TAPS)


def _grouped_2d(k: KernelContext, win: Window, begins: Sequence[CExpr], checks: list[dict[str, str]],
                epilogue: dict[str, Any], group: int, fused: bool) -> Optional[Kernel]:
    """The ``c/conv_grouped.c.j2`` kernel of a float32 2-D grouped Conv (or of one group, where
    ``_direct_wins``) with constant weights, static sizes and pads of at least 0 (not on a
    small-memory target), whose groups have a multiple of 8 output channels (16 where the
    target has 32 vector registers: a block's sums stay in them), or None. A group of 16 channels is a GEMM of 16 rows, which the micro-kernel
    (12 rows on AVX-512) covers in two panels, one a third full, after an im2col copy of the
    group's input; RegNetY-800MF's grouped convolutions took 1.85x onnxruntime's time that way."""
    x, w, y = k.input(0), k.input(1), k.out
    if win.rank != 2 or k.target.small_memory \
            or not static_but_batch(k.target, x.dims, y.dims, w.dims, begins) or min(begins) < 0:
        return None   # (a microcontroller keeps im2col's bands: a group's planes are whole channels)
    n, c = x.dims[:2]
    m, cg = w.dims[:2]
    mg = m // group
    blocks = [b for b in ((16, 8) if k.target.gemm_mr >= 12 else (8,)) if mg % b == 0]
    if not blocks or cg < 2 or cg > GROUPED_MAX_CG:
        return None
    mb = blocks[0]
    pp = phase_planes(x.dims[2:], y.dims[2:], win.kernel, win.strides, win.dilations, begins)
    taps = len(pp.taps)
    # (group, block, input channel, tap, output channel of the block)
    weights = np.asarray(w.value, np.float32).reshape(group, mg // mb, mb, cg, taps)
    packed = k.constant("W_blocks", np.ascontiguousarray(weights.transpose(0, 1, 3, 4, 2)).reshape(-1))
    out = pp.OH * pp.OW
    # Stride 1 and rows as long as the input's ("same" width): each channel's plane is its rows
    # with the padding rows above and below, LEAD floats before them and TRAIL after (the
    # columns the taps reach left of the first output and past the last vector); no padding
    # columns, so the vectors run over the output positions themselves and a tap's column
    # shift c != 0 zeroes, by mask c, the lanes whose column ow + c leaves the row.
    masked = _same_rows(win, x.dims[2:], y.dims[2:])
    if masked:
        (kh, kw), (d0, d1), (pt, pl) = win.kernel, win.dilations, begins
        rows = max(pp.OH + (kh - 1) * d0, pt + pp.H)
        cols = [b * d1 - pl for b in range(kw)]
        shifts = sorted({c for c in cols if c != 0})
        lead, trail = max(0, pl), max(0, (kw - 1) * d1 - pl) + GROUPED_MAX_LANES
        plane = lead + rows * pp.W + trail
        tap_list = [a * d0 * pp.W + c for a in range(kh) for c in cols]
        tap_masks = [shifts.index(c) if c != 0 else -1 for _ in range(kh) for c in cols]
        outp = _ceil_div(out, GROUPED_MAX_LANES) * GROUPED_MAX_LANES
        q = np.arange(outp)
        column = q % pp.W
        masks = np.stack([((q < out) & (column + c >= 0) & (column + c < pp.W)).astype(np.float32)
                          for c in shifts]) if shifts else np.zeros((0, outp), np.float32)
        masks_name = k.constant("masks", masks.reshape(-1)) if shifts else "NULL"
        pad, rsz, qw = 0, 0, pp.W
    else:
        lead, plane, tap_list, tap_masks, shifts, outp, masks_name = 0, pp.floats, pp.taps, [-1] * taps, [], 0, "NULL"
        # PAD floats past the planes (the last vectors read up to QW + 15 floats past the last
        # row's outputs) and a row buffer: MB rows of RSZ positions, whole vectors.
        pad = pp.QW + GROUPED_MAX_LANES
        rsz = _ceil_div(pp.OH * pp.QW, GROUPED_MAX_LANES) * GROUPED_MAX_LANES
        qw = pp.QW
    # One group of fewer blocks than threads (or not a multiple of them): each block's output
    # positions are split into as many parts as threads (whole vectors of the widest SIMD).
    nb, threads = mg // mb, k.target.threads
    parts = threads if group == 1 and masked and isinstance(threads, int) and nb % threads else 1
    # One thread's planes and row buffer (one group: the threads share its planes and have a
    # row buffer each)
    stride = thread_part(cg * plane + pad + mb * rsz, 4)
    shared = thread_part(cg * plane + pad, 4)
    scratch = cexpr.mul(k.target.threads, stride, 4) if group > 1 \
        else cexpr.mul(cexpr.add(shared, cexpr.mul(k.target.threads, mb * rsz)), 4)
    data = {
        "pp": pp.template_data(), "H": pp.H, "W": pp.W, "OH": pp.OH, "OW": pp.OW, "QW": qw,
        "PLANE": plane, "taps": tap_list, "checks": checks, "N": cexpr.lit(n), "C": c, "M": m, "G": group,
        "Cg": cg, "Mg": mg, "MB": mb, "NB": mg // mb, "K": cg * taps, "OUT": out, "STRIDE": stride,
        "PAD": pad, "RSZ": rsz, "SHARED": shared, "LEAD": lead, "masked": masked, "tap_masks": tap_masks,
        "mask_cols": len(shifts), "masks": masks_name, "OUTP": outp, "PARTS": parts, "LANES": GROUPED_MAX_LANES,
        "threads": k.target.threads, "packed": packed, "x_ptr": x.name, "y_ptr": y.name,
        "bias": k.input(2).name if k.has_input(2) else None,
        "epi": epilogue, "fused": fused, "residual": epilogue["residual"],
    }
    kernel = k.kernel("c/conv_grouped.c.j2", helpers=(_gemm.HELPER,), **data)
    kernel.scratch["plane"] = scratch
    return kernel


# Winograd F(m x m, 3x3) (c/conv_winograd.c.j2) where its estimated time is below this share of
# im2col's. Estimates in cycles of a core that does 16 float32 multiply-adds a cycle in the
# GEMM micro-kernel: the products at that rate, per tile a gather and transform of each input
# channel and a transform and scatter of each output channel, per block its GEMM calls and
# the transformed weights streamed from memory (8 bytes a cycle) unless they stay in cache.
# Measured at one thread, against im2col (docs/performance.md): 64 channels on 56 x 56
# 0.37-0.52 of its time, 128 on 28 x 28 0.33-0.47, 256 on 14 x 14 0.41-0.63, 16 to 32 channels
# on 16 x 16 0.69-0.76, 32 to 64 on 8 x 8 (F(2x2)) 0.70-0.74.
WINOGRAD_GAIN = 0.9
WINOGRAD_INPUT_CYCLES = 12       # per tile and input channel, read with vector loads ...
WINOGRAD_GATHER_CYCLES = 36      # ... or gathered lane by lane
WINOGRAD_OUTPUT_CYCLES = 16      # per tile and output channel
WINOGRAD_BLOCK_CYCLES = 2000     # per block (its GEMM calls)
WINOGRAD_STREAM_BYTES = 8        # per cycle, transformed weights larger than WINOGRAD_CACHED_BYTES
WINOGRAD_CACHED_BYTES = 1 << 18
IM2COL_EFFICIENCY = 0.85         # of the micro-kernel's peak, with im2col's copy
WINOGRAD_WORK_BYTES = 1 << 20    # a block's transformed input and products (per thread) ...
# ... unless the block is still less than one panel of tiles


def _winograd_plan(c: int, m_out: int, oh: int, ow: int, lanes: int, threads: int,
                   mr: int) -> Optional[tuple[int, int, bool, bool]]:
    """(tile size m, tile rows per block, gather, split) of the cheapest Winograd plan for a 3x3
    stride-1 convolution, or None where none beats im2col by WINOGRAD_GAIN. The GEMM's columns
    are either the positions of the phase planes, a tile row's tiles and one position past
    them, read with vector loads, or the tiles alone, gathered (``gather``): fewer columns
    where a row has few tiles. With threads, each takes as many whole blocks, and every thread
    a share of the output channels of the blocks left over; or (``split``) every block for a
    share of the output channels, transforming the whole input itself: the way for small maps,
    which have fewer blocks than threads."""
    macs = 9 * oh * ow * m_out * c
    parallel = threads if macs >= PARALLEL_MIN_MACS else 1   # as both kernels decide at run time
    direct = macs / 16 / IM2COL_EFFICIENCY / parallel
    panels = _ceil_div(m_out, mr)
    share = min(1.0, _ceil_div(panels, parallel) * mr / m_out)   # a thread's output channels, split
    best = None
    for m in _winograd.TILES:
        a2 = (m + 2) ** 2
        th, tw = _ceil_div(oh, m), _ceil_div(ow, m)
        per_lane = 4 * a2 * (c + m_out)
        weights = 4 * a2 * m_out * c
        for gather in (False, True):
            run = tw if gather else tw + 1    # GEMM columns per tile row
            per_input = c * (WINOGRAD_GATHER_CYCLES if gather else WINOGRAD_INPUT_CYCLES)
            per_output = a2 * m_out * c / 16 + m_out * WINOGRAD_OUTPUT_CYCLES
            for rows in range(1, th + 1):
                nbl = _ceil_div(rows * run, lanes) * lanes
                if rows > 1 and nbl * per_lane > WINOGRAD_WORK_BYTES and (rows - 1) * run >= lanes:
                    break
                blocks = _ceil_div(th, rows)
                # (split only where there are fewer blocks than threads: with as many, the
                # blocks left over are split so, and splitting every block transforms the whole
                # input on every thread: 48 -> 48 channels over 52 x 52, 7 blocks of 2 tile rows,
                # 0.52 ms split at 2 threads, 0.41 whole and the last block split, Sapphire Rapids)
                for split in (False, True) if 1 < parallel and blocks < parallel else (False,):
                    if split:
                        streamed = weights * share
                        per_block = WINOGRAD_BLOCK_CYCLES + (streamed / WINOGRAD_STREAM_BYTES
                                                             if streamed > WINOGRAD_CACHED_BYTES else 0)
                        cycles = blocks * (nbl * (per_input + per_output * share) + per_block)
                    else:
                        # (with threads and blocks, blocks // parallel whole blocks on each, and
                        # the rest on every thread for its share of the output channels, as split;
                        # one block runs on one thread)
                        per_block = WINOGRAD_BLOCK_CYCLES + (weights / WINOGRAD_STREAM_BYTES
                                                             if weights > WINOGRAD_CACHED_BYTES else 0)
                        shared = WINOGRAD_BLOCK_CYCLES + (weights * share / WINOGRAD_STREAM_BYTES
                                                          if weights * share > WINOGRAD_CACHED_BYTES else 0)
                        sharing = parallel if blocks > 1 else 1
                        cycles = blocks // sharing * (nbl * (per_input + per_output) + per_block) \
                            + blocks % sharing * (nbl * (per_input + per_output * share) + shared)
                    if best is None or cycles < best[4]:
                        best = (m, rows, gather, split, cycles)
    if best is None or best[4] > WINOGRAD_GAIN * direct:
        return None
    return best[:4]


def _winograd_2d(k: KernelContext, win: Window, begins: Sequence[CExpr], checks: list[dict[str, str]],
                 epilogue: dict[str, Any]) -> Optional[Kernel]:
    """The ``c/conv_winograd.c.j2`` kernel of a float32 3x3 stride-1 Conv without dilation or
    groups, with constant weights, static sizes and pads of at least 0, where its estimated
    cost beats im2col's (``_winograd_plan``); else None."""
    x, w, y = k.input(0), k.input(1), k.out
    if win.rank != 2 or not static_but_batch(k.target, x.dims, y.dims, w.dims, begins) or min(begins) < 0:
        return None
    if tuple(win.kernel) != (3, 3) or any(s != 1 for s in (*win.strides, *win.dilations)):
        return None
    n, c = x.dims[:2]
    m_out = w.dims[0]
    oh, ow = y.dims[2:]
    lanes, mr, threads = k.target.gemm_nr, k.target.gemm_mr, k.target.threads
    plan = _winograd_plan(c, m_out, oh, ow, lanes, threads, mr)
    if plan is None:
        return None
    m, rows, gather, split = plan
    wg = _winograd.winograd(m)
    a = wg.alpha
    th, tw = _ceil_div(oh, m), _ceil_div(ow, m)
    # m x m phase planes where the (m + 2) x (m + 2) input tiles are at fixed offsets from the
    # position th * QW + tw of their output tile
    pp = phase_planes(x.dims[2:], (th, tw), (a, a), (m, m), (1, 1), begins)
    assert pp.QW == tw + 1, "internal: Winograd planes of unexpected width"
    run = tw if gather else pp.QW
    nbl = _ceil_div(rows * run, lanes) * lanes
    blocks = _ceil_div(th, rows)
    # the last block's lanes read up to here past a channel's planes' start (lanes past a
    # row's last tile are computed and dropped): the last channel's reach, zeros after its planes
    reach = (blocks - 1) * rows * pp.QW + nbl + max(pp.taps)
    planes = max(c * pp.floats, (c - 1) * pp.floats + reach)
    packed = k.constant("W_winograd", _winograd.transform_filters(np.asarray(w.value, np.float32), wg, mr))
    # with threads, each fills planes of its own with the rows its blocks read (not split by
    # output channels: there every thread reads every row)
    own_planes = threads > 1 and not split and blocks > 1
    has_bias = k.has_input(2)
    data = {
        "pp": pp.template_data(), "H": pp.H, "W": pp.W, "QW": pp.QW, "PLANE": pp.floats, "PLANES": planes,
        "taps": pp.taps, "gather": gather, "checks": checks, "N": n, "C": c, "K": m_out, "Kp": _ceil_div(m_out, mr) * mr,
        "OH": oh, "OW": ow, "OUT": oh * ow, "TH": th, "TW": tw, "m": m, "A": a,
        "BLK_ROWS": rows, "NBL": nbl, "NBLK": blocks, "split": split, "MR": mr, "WORK": a * a * (c + m_out) * nbl,
        "own_planes": own_planes,
        "MACS": 9 * oh * ow * m_out * c, "packed": packed,
        "bias_ptr": k.input(2).name if has_bias else "NULL",
        "has_epilogue": has_bias or epilogue["act"] != "ONNXC_ACT_NONE" or epilogue["residual"] is not None,
        "x_ptr": x.name, "y_ptr": y.name, "epi": epilogue, "residual": epilogue["residual"],
    }
    kernel = k.kernel("c/conv_winograd.c.j2", helpers=(_gemm.HELPER, f"c/helpers/winograd_f{m}.c.j2"), **data)
    kernel.scratch["plane"] = (threads if own_planes else 1) * planes * 4
    kernel.scratch["work"] = threads * a * a * (c + m_out) * nbl * 4
    return kernel
