from ...codegen import cexpr
from ._normalization import check_float_input, check_suffix_param, suffix_checks, suffix_layout, unit_kernel
from ._reduce import normalize_axis
from .registry import OpDef, register


@register("RMSNormalization", since=23)
class RMSNormalization(OpDef):
    """Y = X / sqrt(mean(X^2) + epsilon) * scale over the axes from axis on."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_float_input(ctx, 0, "X")
        check_float_input(ctx, 1, "scale")
        axis = normalize_axis(ctx, node.attrs.get("axis", -1), len(x.shape))
        check_suffix_param(ctx, ctx.inp(1).shape, x.shape[axis:], "scale")
        return [(ctx.inp(1).dtype, x.shape)]

    def lower(self, node, k):
        x, scale = k.input(0), k.input(1)
        axis = node.attrs.get("axis", -1) % x.rank
        P, Q, indices = suffix_layout(k, x.dims[axis:], x.shape[axis:], [scale])
        return unit_kernel(k, x=x, y=k.out, N=cexpr.prod(x.dims[:axis]), G=1, P=P, Q=Q,
                           epsilon=node.attrs.get("epsilon", 1e-5), center=False,
                           params=[(scale, indices[0])], checks=suffix_checks(k, x.dims[axis:], [scale]))
