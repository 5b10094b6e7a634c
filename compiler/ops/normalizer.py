from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from .registry import OpDef, register


@register("Normalizer", since=1, domain=_ml.ML)
class Normalizer(OpDef):
    """Y = each row of X divided by its MAX, L1 or L2 norm (float output)."""
    foldable = False  # onnxruntime's MAX is the largest value, the reference's the largest magnitude

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype not in _ml.FEATURE_TYPES:
            raise ctx.fail(f"X type {x.dtype} is not supported")
        if len(x.shape) not in (1, 2):
            raise ctx.fail(f"X must be [N, C] or [C], got shape {list(x.shape)}")
        if node.attrs.get("norm", "MAX") not in ("MAX", "L1", "L2"):
            raise ctx.fail(f"norm must be MAX, L1 or L2, got {node.attrs.get('norm')!r}")
        return [(dt.FLOAT, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        rows, n = (1, x.dims[0]) if x.rank == 1 else x.dims
        return k.kernel("c/normalizer.c.j2", X=x.name, Y=k.out.name, ctype=x.ctype, norm=node.attrs.get("norm", "MAX"),
                        rows=cexpr.lit(rows), n=cexpr.lit(n))
