import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("MaxRoiPool", since=1)
class MaxRoiPool1(OpDef):
    """Fast R-CNN RoI max pooling: roi r = [batch, x1, y1, x2, y2] is scaled by spatial_scale and
    rounded to pixels (at least 1 x 1), cut into pooled_shape bins (floor of the start, ceil of the
    end, clipped to X), and Y[r, c, ph, pw] is the max of X[batch, c] over the bin (0 when empty)."""

    def infer(self, node: Node, ctx: InferContext):
        x, rois = ctx.inp(0), ctx.inp(1)
        if x.dtype not in dt.FLOATS or rois.dtype != x.dtype:
            raise ctx.fail(f"X and rois must share a float type, got {x.dtype} and {rois.dtype}")
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 5:
            raise ctx.fail(f"X must be 4-D and rois (num_rois, 5), got {x.shape} and {rois.shape}")
        pooled = node.attrs["pooled_shape"]
        if len(pooled) != 2 or min(pooled) < 1:
            raise ctx.fail(f"pooled_shape must be two positive ints, got {list(pooled)}")
        return [(x.dtype, (rois.shape[0], x.shape[1], pooled[0], pooled[1]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, rois, y = k.input(0), k.input(1), k.out
        ct = x.compute
        return k.kernel("c/max_roi_pool.c.j2", N=cexpr.lit(x.dims[0]), C=cexpr.lit(x.dims[1]),
                        H=cexpr.lit(x.dims[2]), W=cexpr.lit(x.dims[3]), R=cexpr.lit(y.dims[0]), PH=y.dims[2],
                        PW=y.dims[3], X=x.name, rois=rois.name, Y=y.name, load=x.dtype.load, store=y.store("{}"),
                        ct=ct, lowest=float_literal(float(np.finfo(np.float64 if ct == "double" else np.float32).min), ct),
                        spatial_scale=float_literal(node.attrs.get("spatial_scale", 1.0), ct))
