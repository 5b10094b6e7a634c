from ...codegen import cexpr
from .. import dtypes as dt
from ._normalization import check_float_input, check_suffix_param, suffix_checks, suffix_layout, unit_kernel
from ._reduce import normalize_axis
from .registry import OpDef, register


@register("LayerNormalization", since=17)
class LayerNormalization(OpDef):
    """Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the axes from axis on; optional Mean, InvStdDev."""
    foldable = False  # the ONNX reference evaluator types Mean and InvStdDev like X, not like stash_type

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_float_input(ctx, 0, "X")
        axis = normalize_axis(ctx, node.attrs.get("axis", -1), len(x.shape))
        block = x.shape[axis:]
        for i, what in ((1, "Scale"), (2, "B")):
            if ctx.has(i):
                check_float_input(ctx, i, what)
                check_suffix_param(ctx, ctx.inp(i).shape, block, what)
        stash = dt.from_onnx(node.attrs.get("stash_type", 1))
        stats_shape = x.shape[:axis] + (1,) * (len(x.shape) - axis)
        return [(x.dtype, x.shape), (stash, stats_shape), (stash, stats_shape)][:len(node.outputs)]

    def lower(self, node, k):
        x = k.input(0)
        axis = node.attrs.get("axis", -1) % x.rank
        scale = k.input(1)
        bias = k.input(2) if k.has_input(2) else None
        P, Q, indices = suffix_layout(k, x.dims[axis:], x.shape[axis:], [scale, bias])
        params = list(zip([scale, bias], indices))
        stats = [(t, what) for t, what in zip(k.outputs[1:], ("mean", "inv_std"))]
        return unit_kernel(k, x=x, y=k.out, N=cexpr.prod(x.dims[:axis]), G=1, P=P, Q=Q,
                           epsilon=node.attrs.get("epsilon", 1e-5), center=True, params=params, stats=stats,
                           checks=suffix_checks(k, x.dims[axis:], [scale, bias]))
