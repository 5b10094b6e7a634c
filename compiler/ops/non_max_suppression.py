from ...codegen import cexpr
from ...codegen.uses import fill
from .. import dtypes as dt
from ._indexing import data_dim
from .registry import OpDef, register


@register("NonMaxSuppression", since=10)
class NonMaxSuppression(OpDef):
    """selected_indices = [batch, class, box] of the boxes greedy IoU suppression keeps, per batch and class."""

    def infer(self, node, ctx):
        boxes, scores = ctx.inp(0), ctx.inp(1)
        if boxes.dtype != dt.FLOAT or scores.dtype != dt.FLOAT:
            raise ctx.fail("boxes and scores must be float tensors")
        if len(boxes.shape) != 3 or len(scores.shape) != 3:
            raise ctx.fail(f"boxes and scores must be 3-D, got {boxes.shape} and {scores.shape}")
        if boxes.shape[2] != 4 and isinstance(boxes.shape[2], int):
            raise ctx.fail(f"boxes must have 4 coordinates, got {boxes.shape[2]}")
        ctx.dims.same(boxes.shape[0], scores.shape[0])
        ctx.dims.same(boxes.shape[1], scores.shape[2])
        for i, dtype in ((2, dt.INT64), (3, dt.FLOAT), (4, dt.FLOAT)):
            if ctx.has(i) and ctx.inp(i).dtype != dtype:
                raise ctx.fail(f"input {i} must be {dtype}, got {ctx.inp(i).dtype}")
        return [(dt.INT64, (data_dim(ctx, node), 3))]

    def lower(self, node, k):
        boxes, scores, y = k.input(0), k.input(1), k.out
        if boxes.dims[2] != 4:
            raise k.unsupported("boxes must have 4 coordinates")

        def scalar(i: int, default: str, fmt: str = "{}") -> str:
            if not k.has_input(i):
                return default
            t = k.input(i)
            return fill("({} > 0 ? {} : {})", cexpr.lit(t.numel), fill(fmt, t.name + "[0]"), default)

        p = {"boxes": boxes.name, "scores": scores.name, "batches": cexpr.lit(boxes.dims[0]),
             "classes": cexpr.lit(scores.dims[1]), "boxes_n": cexpr.lit(boxes.dims[1]),
             "center": int(bool(node.attrs.get("center_point_box", 0))),
             "max_out": scalar(2, "0", "({0} > 0 ? {0} : 0)"), "iou": scalar(3, "0.0f"),
             "filter": scalar(4, "0", "1"), "score": scalar(4, "0.0f")}
        kernel = k.kernel("c/nms.c.j2", helpers=("c/helpers/nms.c.j2",), p=p, Y=y.name,
                          count=cexpr.lit(y.dims[0]))
        kernel.scratch = {"work": cexpr.mul(24, boxes.dims[1])}
        if k.data_dims:
            kernel.shape_template = "c/nms_shape.c.j2"
            kernel.allocates = True   # (its work buffer: the output's size is not known yet)
            kernel.shape_data = {"p": p}
        return kernel
