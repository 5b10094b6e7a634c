from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from . import _gemm
from ._conv_pool import Window, affine, axes_data, flat_index, negate, per_group, row_offset, window
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register


@register("ConvTranspose", since=1)
class ConvTranspose(OpDef):
    """Y = transposed convolution of X with W (C, M/group, kernel...) + B."""

    def infer(self, node: Node, ctx: InferContext):
        x, w = ctx.inp(0), ctx.inp(1)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        for i in (1, 2):
            if ctx.has(i) and ctx.inp(i).dtype != x.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from X type {x.dtype}")
        if len(x.shape) < 3 or len(w.shape) != len(x.shape):
            raise ctx.fail(f"X {list(x.shape)} and W {list(w.shape)} must have the same rank, at least 3")
        group = node.attrs.get("group", 1)
        if group < 1 or (isinstance(x.shape[1], int) and x.shape[1] % group):
            raise ctx.fail(f"group {group} must be positive and divide the {x.shape[1]} input channels")
        rank = len(x.shape) - 2
        win = window(node, rank, w.shape[2:], ctx.fail)
        output_padding = _output_padding(node, rank, ctx.fail)
        given = _output_shape(node, rank, ctx.fail)
        dims = ctx.dims
        try:
            dims.same(x.shape[1], w.shape[0])
            if given is not None:
                spatial = list(given)
            elif win.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                spatial = [dims.mul(d, s) for d, s in zip(x.shape[2:], win.strides)]
            else:
                spatial = []
                for a, d in enumerate(x.shape[2:]):
                    extra = output_padding[a] + win.extent(a) - win.pads[a] - win.pads[rank + a]
                    spatial.append(dims.add(dims.mul(dims.sub(d, 1), win.strides[a]), extra))
        except ShapeError as e:
            raise ctx.fail(str(e)) from None
        if any(isinstance(d, int) and d < 0 for d in spatial):
            raise ctx.fail(f"output spatial shape {spatial} is negative")
        if ctx.has(2) and len(ctx.inp(2).shape) != 1:
            raise ctx.fail(f"B must be 1-D, got shape {list(ctx.inp(2).shape)}")
        return [(x.dtype, (x.shape[0], dims.mul(w.shape[1], group), *spatial))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, y = k.input(0), k.input(1), k.out
        group = node.attrs.get("group", 1)
        rank = x.rank - 2
        win = window(node, rank, w.shape[2:], k.unsupported)
        in_dims, out_dims = x.dims[2:], y.dims[2:]
        begins = _pads_begin(node, win, in_dims, out_dims, _output_padding(node, rank, k.unsupported))
        g = _gemm.gemm_type(x.dtype)
        native = _gemm.native(x.dtype)
        n, c, mg = x.dims[0], x.dims[1], w.dims[1]
        m = y.dims[1]
        cg = per_group(c, group)
        mkp = cexpr.mul(mg, cexpr.prod(win.kernel))
        size_in, size_out = cexpr.prod(in_dims), cexpr.prod(out_dims)
        checks = []
        if c != w.dims[0]:
            checks.append({"cond": f"{cexpr.lit(c)} != {cexpr.lit(w.dims[0])}",
                           "msg": c_string("ConvTranspose: X channels differ from W's first dim")})
        if not isinstance(c, int):
            checks.append({"cond": f"{c} % {group} != 0",
                           "msg": c_string("ConvTranspose: X channels are not a multiple of group")})
        if k.has_input(2) and k.input(2).dims[0] != m:
            checks.append({"cond": f"{cexpr.lit(k.input(2).dims[0])} != {cexpr.lit(m)}",
                           "msg": c_string("ConvTranspose: B does not have one value per output channel")})
        axes = axes_data(win, in_dims, out_dims, begins)
        for a, axis in enumerate(axes):
            # output position of input i{a} (outer axes) or the shift of i * stride (last axis)
            i_term = [(f"i{a}", win.strides[a])] if a < rank - 1 else []
            axis["pos"] = affine(*i_term, (f"k{a}", win.dilations[a]), const=negate(begins[a]))
        data = {
            "checks": checks, "ct": g.ctype, "yt": y.ctype, "gemm": g.fn,
            "N": cexpr.lit(n), "C": cexpr.lit(c), "M": cexpr.lit(m), "G": group, "Cg": cexpr.lit(cg),
            "Mg": cexpr.lit(mg), "MKP": cexpr.lit(mkp), "IN": cexpr.lit(size_in), "OUT": cexpr.lit(size_out),
            "axes": axes,
            "x_ptr": x.name, "x_load": None if native else x.load(f"(n * {cexpr.lit(c)} + g * {cexpr.lit(cg)}) * "
                                                                  f"{cexpr.lit(size_in)} + i"),
            "w_ptr": w.name, "w_load": None if native else w.load("i"),
            "bias": k.input(2).load(f"g * {cexpr.lit(mg)} + m") if k.has_input(2) else "0",
            "y_ptr": y.name, "y_store": None if native else y.store("acc[i]"),
            "row_index": flat_index(["m"] + [f"k{a}" for a in range(rank)], [mg] + list(win.kernel)),
            "src_offset": row_offset([f"i{a}" for a in range(rank - 1)], in_dims),
            "dst_offset": row_offset([f"o{a}" for a in range(rank - 1)], out_dims),
        }
        kernel = k.kernel("c/conv_transpose.c.j2", helpers=g.helpers, **data)
        if not native:
            kernel.scratch["w"] = cexpr.mul(c, mkp, g.size)
            kernel.scratch["x"] = cexpr.mul(cg, size_in, g.size)
            kernel.scratch["acc"] = cexpr.mul(mg, size_out, g.size)
        kernel.scratch["col"] = cexpr.mul(mkp, size_in, g.size)
        kernel.scratch["pack"] = _gemm.pack_bytes(g, mkp, size_in, cg, target=k.target)
        return kernel


def _output_padding(node: Node, rank: int, fail) -> list[int]:
    values = node.attrs.get("output_padding") or (0,) * rank
    if len(values) != rank:
        raise fail(f"output_padding {list(values)} must have {rank} values")
    return list(values)


def _output_shape(node: Node, rank: int, fail):
    """The output_shape attribute's spatial dims (it may also list N and C), or None."""
    values = node.attrs.get("output_shape")
    if not values:
        return None
    if len(values) not in (rank, rank + 2):
        raise fail(f"output_shape {list(values)} must have {rank} spatial values")
    return list(values[-rank:])


def _pads_begin(node: Node, win: Window, in_dims, out_dims, output_padding: list[int]) -> list[cexpr.CExpr]:
    """Begin pads: explicit, or split from the total padding that output_shape / SAME imply
    (the odd one goes to the end for SAME_UPPER, to the start otherwise)."""
    if win.auto_pad not in ("SAME_UPPER", "SAME_LOWER") and not node.attrs.get("output_shape"):
        return list(win.pads[:win.rank])
    begins: list[cexpr.CExpr] = []
    for a, (x, o) in enumerate(zip(in_dims, out_dims)):
        s = win.strides[a]
        fixed = output_padding[a] + win.extent(a) - s
        if isinstance(x, int) and isinstance(o, int):
            total = s * x + fixed - o
            begins.append(total // 2 if win.auto_pad == "SAME_UPPER" else total - total // 2)
            continue
        total_c = f"({s} * {cexpr.lit(x)} + {fixed} - {cexpr.lit(o)})"
        half = f"onnxc_dim_floordiv({total_c}, 2)"
        begins.append(half if win.auto_pad == "SAME_UPPER" else f"({total_c} - {half})")
    return begins
