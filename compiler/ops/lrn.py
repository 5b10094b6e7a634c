from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ._reduce import check_type
from .registry import OpDef, register


@register("LRN", since=1)
class LRN(OpDef):
    """Y = X / (bias + alpha / size * sum of X^2 over the neighbouring channels)^beta."""
    foldable = False  # the ONNX reference evaluator loops over the batch axis instead of the channels

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_type(ctx, x.dtype, dt.FLOATS)
        if len(x.shape) < 2:
            raise ctx.fail("X must have rank >= 2 (N x C x ...)")
        if node.attrs["size"] <= 0:
            raise ctx.fail(f"size = {node.attrs['size']} must be positive")
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        c = x.compute
        size = node.attrs["size"]
        return k.kernel("c/lrn.c.j2", Y=y.name, compute=c, load=x.load("{}"), store=y.store("{}"),
                        N=cexpr.lit(x.dims[0]), C=cexpr.lit(x.dims[1]), S=cexpr.lit(cexpr.prod(x.dims[2:])),
                        before=(size - 1) // 2, after=size // 2,
                        bias=float_literal(node.attrs.get("bias", 1.0), c),
                        alpha=float_literal(node.attrs.get("alpha", 1e-4) / size, c),
                        beta=float_literal(node.attrs.get("beta", 0.75), c), pow=math_fn("pow", c),
                        # (t^0.75 as sqrt(t) sqrt(sqrt(t)), square roots the compiler vectorizes:
                        # AlexNet's, GoogLeNet's and Inception-v1's beta; pow a call per output)
                        three_quarters=float(node.attrs.get("beta", 0.75)) == 0.75, root=math_fn("sqrt", c))
