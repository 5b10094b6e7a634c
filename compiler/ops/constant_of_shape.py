import numpy as np

from ...codegen import cexpr
from ...codegen.literals import c_literal
from .. import dtypes as dt
from ..errors import RankKnownAtRunTime
from ..ir import Node
from .registry import OpDef, register


@register("ConstantOfShape", since=9)
class ConstantOfShape(OpDef):
    """output = a tensor of the shape given by input, every element the one-element value."""

    @staticmethod
    def value(node: Node) -> np.ndarray:
        value = node.attrs.get("value")
        return np.zeros(1, dtype=np.float32) if value is None else value

    def infer(self, node, ctx):
        shape, value = ctx.inp(0), self.value(node)
        if value.size != 1:
            raise ctx.fail(f"value must have one element, not {value.size}")
        if shape.dtype != dt.INT64 or len(shape.shape) != 1:
            raise ctx.fail("input must be a 1-D int64 tensor")
        if not isinstance(shape.shape[0], int):
            raise RankKnownAtRunTime(f"{node.label}: the length of its input, the output's rank, is known only "
                                     "at run time")
        dims = ctx.const(0)
        known = ctx.sym_value(0)
        if dims is None and known is not None:
            return [(dt.from_numpy(value.dtype), known)]
        if dims is None:
            return [(dt.from_numpy(value.dtype), tuple(ctx.dims.data(node.name or "ConstantOfShape")
                                                       for _ in range(shape.shape[0])))]
        if np.any(dims < 0):
            raise ctx.fail(f"negative dim in shape {dims.tolist()}")
        return [(dt.from_numpy(value.dtype), tuple(int(d) for d in dims))]

    def lower(self, node, k):
        y = k.out
        kernel = k.kernel("c/fill.c.j2", output=y.name, count=cexpr.lit(y.numel),
                          value=c_literal(self.value(node).reshape(-1)[0], y.dtype))
        if k.data_dims:
            kernel.shape_template = "c/constant_of_shape_shape.c.j2"
            kernel.shape_data = {"shape": k.input(0).name}
        return kernel
