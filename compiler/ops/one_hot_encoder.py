from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import c_literal
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from . import _ml
from .registry import OpDef, register


@register("OneHotEncoder", since=1, domain=_ml.ML)
class OneHotEncoder(OpDef):
    """Y[..., j] = 1.0 where X (cast to int64) is the j-th of cats_int64s, else 0; unknown values give a zero
    row (zeros=1) or fail (zeros=0)."""
    foldable = False

    def infer(self, node, ctx):
        if node.attrs.get("cats_strings"):
            raise UnsupportedError(f"{node.label}: string categories (cats_strings) are not supported: "
                                   "onnxc has no string tensors yet")
        cats = node.attrs.get("cats_int64s", ())
        if not cats:
            raise ctx.fail("cats_int64s must list at least one category")
        x = ctx.inp(0)
        if x.dtype not in _ml.FEATURE_TYPES:
            raise ctx.fail(f"X type {x.dtype} is not supported")
        return [(dt.FLOAT, tuple(x.shape) + (len(cats),))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        cats = list(node.attrs["cats_int64s"])
        column = {c: i for i, c in enumerate(cats)}  # the last position of a duplicate wins
        ordered = sorted(column)
        return k.kernel("c/one_hot_encoder.c.j2", X=x.name, Y=k.out.name, total=cexpr.lit(x.numel),
                        count=len(cats), cats=[c_literal(c, dt.INT64) for c in ordered],
                        columns=[column[c] for c in ordered], float=x.dtype.is_float,
                        zeros=bool(node.attrs.get("zeros", 1)))
