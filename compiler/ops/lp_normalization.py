from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from .. import dtypes as dt
from ._reduce import check_type, normalize_axis, split_at
from .registry import OpDef, register


@register("LpNormalization", since=1)
class LpNormalization(OpDef):
    """output = input / ||input||_p along axis (p = 1 or 2); 0 where the norm is 0."""
    foldable = False  # the ONNX reference evaluator forgets the absolute value for p = 1

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, dt.FLOATS)
        if len(x.shape) == 0:
            raise ctx.fail("input must have rank >= 1")
        normalize_axis(ctx, node.attrs.get("axis", -1), len(x.shape))
        if node.attrs.get("p", 2) not in (1, 2):
            raise ctx.fail(f"p = {node.attrs.get('p')} is not 1 or 2")
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        outer, n, inner = split_at(x.dims, node.attrs.get("axis", -1) % x.rank)
        c = x.compute
        step = "k" if inner == 1 else f"k * {cexpr.lit(inner)}"
        return k.kernel("c/lp_norm.c.j2", output=y.name, compute=c, load=x.load("{}"), store=y.store("{}"),
                        outer=cexpr.lit(outer), n=cexpr.lit(n), inner=cexpr.lit(inner),
                        block=cexpr.lit(cexpr.mul(n, inner)), at=f"base + {step}", p=node.attrs.get("p", 2),
                        fabs=math_fn("fabs", c), sqrt=math_fn("sqrt", c))
