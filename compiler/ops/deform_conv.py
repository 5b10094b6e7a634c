from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("DeformConv", since=19)
class DeformConv(OpDef):
    """2-D convolution whose sampling points move by learned offsets (bilinear), optionally masked."""

    def _params(self, node: Node, ctx: InferContext) -> dict:
        """Kernel shape, strides, pads, dilations and groups, validated against the input shapes."""
        x, w = ctx.inp(0), ctx.inp(1)
        if len(x.shape) != 4 or len(w.shape) != 4:
            raise ctx.fail(f"only 2-D deformable convolution is supported (X {x.shape}, W {w.shape})")
        kernel = tuple(node.attrs.get("kernel_shape") or w.shape[2:])
        if not all(isinstance(d, int) for d in kernel) or kernel != tuple(w.shape[2:]):
            raise ctx.fail(f"kernel_shape {kernel} must be static and match W's spatial dims {w.shape[2:]}")
        strides = tuple(node.attrs.get("strides") or (1, 1))
        dilations = tuple(node.attrs.get("dilations") or (1, 1))
        pads = tuple(node.attrs.get("pads") or (0, 0, 0, 0))
        group, offset_group = int(node.attrs.get("group", 1)), int(node.attrs.get("offset_group", 1))
        if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
            raise ctx.fail("kernel_shape, strides and dilations need 2 values and pads 4")
        if min(strides + dilations + kernel) < 1 or min(pads) < 0 or group < 1 or offset_group < 1:
            raise ctx.fail("strides, dilations and kernel_shape must be positive and pads non-negative")
        channels, out_channels = x.shape[1], w.shape[0]
        if not isinstance(channels, int) or not isinstance(out_channels, int) or not isinstance(w.shape[1], int):
            raise ctx.fail("the channel counts must be static")
        if channels != w.shape[1] * group or out_channels % group or channels % offset_group:
            raise ctx.fail(f"channels {channels}, W {w.shape}, group {group}, offset_group {offset_group} "
                           "are inconsistent")
        return {"kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads,
                "group": group, "offset_group": offset_group}

    def infer(self, node, ctx):
        p = self._params(node, ctx)
        x, w = ctx.inp(0), ctx.inp(1)
        kh, kw = p["kernel"]
        out = []
        for axis in range(2):
            span = (p["kernel"][axis] - 1) * p["dilations"][axis] + 1
            padded = ctx.dims.add(x.shape[2 + axis], p["pads"][axis] + p["pads"][axis + 2] - span)
            d = ctx.dims.add(ctx.dims.floordiv(padded, p["strides"][axis]), 1)
            if isinstance(d, int) and d < 1:
                raise ctx.fail(f"output spatial dim {axis} would be {d}")
            out.append(d)
        batch = x.shape[0]
        for i, name, channels in ((2, "offset", p["offset_group"] * kh * kw * 2),
                                  (4, "mask", p["offset_group"] * kh * kw)):
            if not ctx.has(i):
                continue
            t = ctx.inp(i)
            if t.dtype != x.dtype or len(t.shape) != 4 or t.shape[1] != channels:
                raise ctx.fail(f"{name} must be a 4-D {x.dtype} tensor with {channels} channels, got "
                               f"{t.dtype} {t.shape}")
            batch = ctx.dims.same(batch, t.shape[0])
            out = [ctx.dims.same(a, b) for a, b in zip(out, t.shape[2:])]
        if w.dtype != x.dtype or x.dtype not in dt.FLOATS:
            raise ctx.fail(f"X and W must share a float type (got {x.dtype}, {w.dtype})")
        if ctx.has(3) and (ctx.inp(3).dtype != x.dtype or tuple(ctx.inp(3).shape) != (w.shape[0],)):
            raise ctx.fail(f"B must be a {x.dtype} vector of {w.shape[0]} elements")
        return [(x.dtype, (batch, w.shape[0], out[0], out[1]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        p = self._params(node, InferContext(node, None))
        x, w, offset, y = k.input(0), k.input(1), k.input(2), k.out
        compute = x.compute
        points = cexpr.mul(y.dims[2], y.dims[3])
        rows = x.dims[1] * p["kernel"][0] * p["kernel"][1]
        size = 4 if compute == "float" else 8
        kernel = k.kernel(
            "c/deform_conv.c.j2",
            N=cexpr.lit(y.dims[0]), C=x.dims[1], H=cexpr.lit(x.dims[2]), W=cexpr.lit(x.dims[3]),
            M=y.dims[1], OH=cexpr.lit(y.dims[2]), OW=cexpr.lit(y.dims[3]), P=cexpr.lit(points),
            KH=p["kernel"][0], KW=p["kernel"][1], SH=p["strides"][0], SW=p["strides"][1],
            DH=p["dilations"][0], DW=p["dilations"][1], PH=p["pads"][0], PW=p["pads"][1],
            group=p["group"], offset_group=p["offset_group"],
            X=x.name, Wt=w.name, offset=offset.name, Y=y.name,
            bias=k.input(3).name if k.has_input(3) else None, mask=k.input(4).name if k.has_input(4) else None,
            compute=compute, floor="floorf" if compute == "float" else "floor",
            load=x.dtype.load, store=x.dtype.store)
        kernel.scratch = {"columns": cexpr.mul(size * rows, points), "acc": cexpr.mul(size, points)}
        return kernel
