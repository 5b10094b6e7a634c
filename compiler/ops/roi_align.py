from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("RoiAlign", since=10)
class RoiAlign(OpDef):
    """Y[r, c] = average (or max) of bilinear samples of X[batch_indices[r], c] over each bin of roi r."""

    def _check(self, node: Node, ctx: InferContext) -> None:
        x, rois, idx = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        if x.dtype not in dt.FLOATS or rois.dtype != x.dtype:
            raise ctx.fail(f"X and rois must share a float type, got {x.dtype} and {rois.dtype}")
        if idx.dtype != dt.INT64 or len(idx.shape) != 1:
            raise ctx.fail("batch_indices must be a 1-D int64 tensor")
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4:
            raise ctx.fail(f"X must be 4-D and rois (num_rois, 4), got {x.shape} and {rois.shape}")
        a = node.attrs
        if a.get("mode", "avg") not in ("avg", "max"):
            raise ctx.fail(f"mode {a['mode']!r} is not avg or max")
        if a.get("coordinate_transformation_mode", "output_half_pixel") not in ("half_pixel", "output_half_pixel"):
            raise ctx.fail(f"coordinate_transformation_mode {a['coordinate_transformation_mode']!r} is not supported")
        if a.get("output_height", 1) < 1 or a.get("output_width", 1) < 1 or a.get("sampling_ratio", 0) < 0:
            raise ctx.fail("output_height and output_width must be positive, sampling_ratio not negative")

    def infer(self, node, ctx):
        self._check(node, ctx)
        x, rois, idx = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        num = ctx.dims.same(rois.shape[0], idx.shape[0])
        return [(x.dtype, (num, x.shape[1], int(node.attrs.get("output_height", 1)),
                           int(node.attrs.get("output_width", 1))))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, rois, idx, y = k.input(0), k.input(1), k.input(2), k.out
        a = node.attrs
        compute = x.compute
        kernel = k.kernel(
            "c/roi_align.c.j2", N=cexpr.lit(x.dims[0]), C=cexpr.lit(x.dims[1]), H=cexpr.lit(x.dims[2]),
            W=cexpr.lit(x.dims[3]), R=cexpr.lit(y.dims[0]), PH=y.dims[2], PW=y.dims[3], X=x.name,
            rois=rois.name, idx=idx.name, Y=y.name, ctype=x.ctype, load=x.dtype.load, store=y.dtype.store, ct=compute,
            max=a.get("mode", "avg") == "max", sampling_ratio=int(a.get("sampling_ratio", 0)),
            half_pixel=a.get("coordinate_transformation_mode", "output_half_pixel") == "half_pixel",
            spatial_scale=repr(float(a.get("spatial_scale", 1.0))),
            check=f"{cexpr.lit(rois.dims[0])} != {cexpr.lit(idx.dims[0])}" if rois.dims[0] != idx.dims[0] else None)
        kernel.scratch = {"acc": cexpr.mul(x.dims[1], 8)}
        return kernel
