from ...codegen import cexpr
from .. import dtypes as dt
from .registry import OpDef, register


@register("FeatureVectorizer", since=1, domain="ai.onnx.ml")
class FeatureVectorizer(OpDef):
    """Y[n] = the rows of every input (all of one type) side by side, as float: input i ([N, ...], or [C] as one row)
    fills inputdimensions[i] columns, its first values if it has more, zeros after if fewer."""
    types = (dt.INT32, dt.INT64, dt.FLOAT, dt.DOUBLE)

    def widths(self, node, ctx) -> list[int]:
        widths = list(node.attrs.get("inputdimensions", ()))
        if len(widths) != len(node.inputs) or min(widths, default=0) < 0:
            raise ctx.fail(f"inputdimensions {widths} must give a size >= 0 for each of the {len(node.inputs)} inputs")
        return widths

    def infer(self, node, ctx):
        widths = self.widths(node, ctx)
        rows = None
        for i in range(len(node.inputs)):
            x = ctx.inp(i)
            if x.dtype not in self.types:
                raise ctx.fail(f"input {i} has type {x.dtype}, not int32, int64, float or double")
            if x.dtype != ctx.inp(0).dtype:
                raise ctx.fail(f"input {i} has type {x.dtype}, input 0 {ctx.inp(0).dtype}: they must have the same type")
            if not x.shape:
                raise ctx.fail(f"input {i} is a scalar")
            n = 1 if len(x.shape) == 1 else x.shape[0]
            rows = n if rows is None else ctx.dims.same(rows, n)
        return [(dt.FLOAT, (rows, sum(widths)))]

    def lower(self, node, k):
        y = k.out
        parts, column = [], 0
        for i, width in enumerate(node.attrs["inputdimensions"]):
            x = k.input(i)
            row = cexpr.prod(x.dims if x.rank == 1 else x.dims[1:])
            parts.append({"name": x.name, "load": x.load("{}"), "row": cexpr.lit(row), "width": width,
                          "column": column})
            column += width
        return k.kernel("c/feature_vectorizer.c.j2", Y=y.name, N=cexpr.lit(y.dims[0]), total=column, parts=parts)
