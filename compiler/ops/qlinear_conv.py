from __future__ import annotations

from typing import Optional

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from ...codegen.uses import fill
from .. import dtypes as dt
from ..ir import Node
from . import _gemm
from . import _qgemm
from . import _cmsis_nn
from . import _quantize as qz
from ._conv_pool import affine, axes_data, conv_shape, flat_index, negate, pads_c, per_group, window
from ._elementwise import check_dtype
from .conv import conv_kernel
from .registry import InferContext, OpDef, register

INT8S = (dt.INT8, dt.UINT8)
PER_CHANNEL = (4, 5)   # w_scale and w_zero_point: one value or one per output channel


@register("QLinearConv", since=10)
class QLinearConv(OpDef):
    """y = quantize(conv(x - x_zero_point, w - w_zero_point) + B, x_scale * w_scale / y_scale)."""

    def infer(self, node: Node, ctx: InferContext):
        x, w = ctx.inp(0), ctx.inp(3)
        check_dtype(ctx, x.dtype, INT8S, "x")
        check_dtype(ctx, w.dtype, INT8S, "w")
        check_dtype(ctx, ctx.inp(7).dtype, INT8S, "y_zero_point")
        for i, want in ((1, dt.FLOAT), (2, x.dtype), (4, dt.FLOAT), (5, w.dtype), (6, dt.FLOAT)):
            if ctx.inp(i).dtype != want:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} should be {want}")
        if ctx.has(8) and ctx.inp(8).dtype != dt.INT32:
            raise ctx.fail(f"B type {ctx.inp(8).dtype} should be int32")
        shape = conv_shape(node, ctx.dims, x.shape, w.shape, ctx.fail)
        for i in (1, 2, 4, 5, 6, 7):
            s = ctx.inp(i).shape
            sizes = (1, shape[1]) if i in PER_CHANNEL else (1,)
            if len(s) > 1 or (s and isinstance(s[0], int) and s[0] not in sizes):
                raise ctx.fail(f"input {i} has shape {list(s)}: expects one value"
                               + (" or one per output channel" if i in PER_CHANNEL else ""))
        if ctx.has(8):
            b = ctx.inp(8).shape
            if len(b) != 1 or (isinstance(b[0], int) and isinstance(shape[1], int) and b[0] != shape[1]):
                raise ctx.fail(f"B must be a vector of the {shape[1]} output channels, got shape {list(b)}")
        return [(ctx.inp(7).dtype, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, y = k.input(0), k.input(3), k.out
        m = w.dims[0]
        mg = per_group(m, node.attrs.get("group", 1))
        out = cexpr.prod(y.dims[2:])
        checks = []

        def param(i: int, channel: str) -> str:
            """Input i's value for output channel ``channel`` (a C expression)."""
            t = k.input(i)
            per_channel = i in PER_CHANNEL and t.numel != 1
            want = m if per_channel else 1
            if not (isinstance(t.numel, int) and isinstance(want, int)):
                checks.append({"cond": f"{cexpr.lit(t.numel)} != {cexpr.lit(want)}",
                               "msg": c_string(f"QLinearConv: {t.name} does not have "
                                               + ("one value per output channel" if per_channel else "one value"))})
            # (names t where the text is written, not here: the scales only where not constants)
            return fill("{}[{}]", t.name, channel) if per_channel else fill("{}[0]", t.name)

        bias = "0"
        if k.has_input(8):
            b: TensorRef = k.input(8)
            if not (isinstance(b.dims[0], int) and isinstance(m, int)):
                checks.append({"cond": f"{cexpr.lit(b.dims[0])} != {cexpr.lit(m)}",
                               "msg": c_string("QLinearConv: B does not have one value per output channel")})
            bias = fill("(uint32_t){}[{{channel}}]", b.name)
        w_scale = k.input(4)
        scale = qz.output_scale(k, k.input(1), w_scale, divisor=k.input(6))
        per_channel = w_scale.numel != 1

        def store(acc: str, channel: str) -> str:
            runtime = fill("{} * {} / {}", param(1, ''), param(4, channel), param(6, ''))
            return qz.requant(f"(int32_t){acc}", y, param(7, ''), scale, channel if per_channel else "0", runtime)

        note = ""
        if k.target.cmsis_nn:
            reason = _cmsis_nn.conv_reason(node, k)
            if reason is None:
                kernel = _cmsis_nn.conv_kernel(node, k, scale)
                kernel.note = "CMSIS-NN " + ("arm_depthwise_conv_wrapper_s8" if kernel.data["depthwise"]
                                             else "arm_convolve_wrapper_s8")
                return kernel
            note = f"portable kernel, not CMSIS-NN: {reason}"
        if k.target.integer_only:
            kernel = self.direct(node, k, checks, bias.format(channel="m"), param(2, ""), param(5, "m"),
                                 store("acc", "m"))
            if kernel is not None:
                kernel.helpers += qz.requant_helpers(scale)
                kernel.note = note
                return kernel
        operands = KernelContext(node, [x, w], k.outputs, k.dim, k.data_dims, k.target, k.uses)
        operands.constants = k.constants
        if k.target.int8_gemm:
            kernel = _qgemm.conv_kernel(node, operands, x_zero=param(2, ""), w_zero=param(5, "m"),
                                        bias=bias.format(channel=f"g * {cexpr.lit(mg)} + m"),
                                        y_store=store("acc", f"g * {cexpr.lit(mg)} + m"), checks=checks)
            if kernel is not None:
                kernel.helpers += qz.requant_helpers(scale)
                return kernel
        channel = f"g * {cexpr.lit(mg)} + i / {cexpr.lit(out)}"
        kernel = conv_kernel(node, operands, _gemm.UINT32,
                             x_load=f"(uint32_t)((int32_t){{}} - (int32_t){param(2, '')})", x_native=False,
                             w_load=f"(uint32_t)((int32_t){w.name}[m * {{K}} + i] - (int32_t){param(5, 'm')})",
                             bias=bias.format(channel=f"g * {cexpr.lit(mg)} + m"), y_store=store("acc[i]", channel),
                             checks=checks)
        kernel.helpers += qz.requant_helpers(scale)
        kernel.note = note
        return kernel

    @staticmethod
    def direct(node: Node, k: KernelContext, checks: list, bias: str, x_zero: str, w_zero: str,
               y_store: str) -> Optional[Kernel]:
        """The integer-only kernel (c/qlinear_conv_direct.c.j2), or None where the general one is needed."""
        x, w, y = k.input(0), k.input(3), k.out
        rank = x.rank - 2
        win = window(node, rank, w.shape[2:], k.unsupported)
        in_dims, out_dims = x.dims[2:], y.dims[2:]
        begins, _ = pads_c(win, in_dims, out_dims)
        axes = axes_data(win, in_dims, out_dims, begins)
        for a, axis in enumerate(axes):
            axis["pos"] = affine((f"o{a}", win.strides[a]), (f"k{a}", win.dilations[a]), const=negate(begins[a]))
        group = node.attrs.get("group", 1)
        c, cg, m = x.dims[1], w.dims[1], w.dims[0]
        if c != cexpr.mul(cg, group):
            checks.append({"cond": f"{cexpr.lit(c)} != {cexpr.lit(cexpr.mul(cg, group))}",
                           "msg": c_string("QLinearConv: X channels differ from W channels times group")})
        kp = cexpr.prod(win.kernel)
        return k.kernel("c/qlinear_conv_direct.c.j2", checks=checks, N=cexpr.lit(x.dims[0]), C=cexpr.lit(c),
                        Cg=cexpr.lit(cg), M=cexpr.lit(m), Mg=cexpr.lit(per_group(m, group)),
                        K=cexpr.lit(cexpr.mul(cg, kp)), KP=cexpr.lit(kp), IN=cexpr.lit(cexpr.prod(in_dims)),
                        OUT=cexpr.lit(cexpr.prod(out_dims)), axes=axes, x=x.name, w=w.name, y=y.name,
                        xt=x.ctype, wt=w.ctype, yt=y.ctype, x_zero=x_zero, w_zero=w_zero, bias=bias,
                        x_index=flat_index([f"i{a}" for a in range(rank)], in_dims),
                        w_index=flat_index([f"k{a}" for a in range(rank)], win.kernel), y_store=y_store)
