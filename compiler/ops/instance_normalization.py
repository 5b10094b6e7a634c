from ...codegen import cexpr
from ._normalization import check_float_input, check_vector, length_checks, unit_kernel
from .registry import OpDef, register


@register("InstanceNormalization", since=1)
class InstanceNormalization(OpDef):
    """output = (input - mean) / sqrt(var + epsilon) * scale + B, statistics per sample and channel."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_float_input(ctx, 0, "input")
        if len(x.shape) < 2:
            raise ctx.fail("input must have rank >= 2 (N x C x ...)")
        for i, what in ((1, "scale"), (2, "B")):
            check_float_input(ctx, i, what)
            check_vector(ctx, i, x.shape[1], what)
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x = k.input(0)
        index = "0" if x.dims[1] == 1 else "g"
        return unit_kernel(k, x=x, y=k.out, N=x.dims[0], G=x.dims[1], P=1, Q=cexpr.prod(x.dims[2:]),
                           epsilon=node.attrs.get("epsilon", 1e-5), center=True,
                           params=[(k.input(1), index), (k.input(2), index)],
                           checks=length_checks(k, [(k.input(1), x.dims[1]), (k.input(2), x.dims[1])]))
