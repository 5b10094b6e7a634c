from ...codegen import cexpr
from ._normalization import check_float_input, check_vector, length_checks, unit_kernel
from .registry import OpDef, register


class GroupNormalizationBase(OpDef):
    """Y = (X - mean) / sqrt(var + epsilon) * scale + bias, statistics per sample and group of channels."""
    foldable = False  # the ONNX reference evaluator has no GroupNormalization
    per_channel = True

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_float_input(ctx, 0, "X")
        if len(x.shape) < 2:
            raise ctx.fail("X must have rank >= 2 (N x C x ...)")
        groups, channels = node.attrs["num_groups"], x.shape[1]
        if groups <= 0 or (isinstance(channels, int) and channels % groups):
            raise ctx.fail(f"num_groups = {groups} does not divide the {channels} channels")
        for i, what in ((1, "scale"), (2, "bias")):
            check_float_input(ctx, i, what)
            check_vector(ctx, i, channels if self.per_channel else groups, what)
        return [(x.dtype, x.shape)]

    def lower(self, node, k):
        x = k.input(0)
        groups, channels = node.attrs["num_groups"], x.dims[1]
        if not isinstance(channels, int):
            raise k.unsupported("GroupNormalization with a symbolic number of channels")
        P = channels // groups
        if not self.per_channel:
            index = "0" if groups == 1 else "g"
        else:
            index = {(True, True): "0", (True, False): "p", (False, True): "g"}.get((groups == 1, P == 1),
                                                                                     f"g * {P} + p")
        count = channels if self.per_channel else groups
        return unit_kernel(k, x=x, y=k.out, N=x.dims[0], G=groups, P=P, Q=cexpr.prod(x.dims[2:]),
                           epsilon=node.attrs.get("epsilon", 1e-5), center=True,
                           params=[(k.input(1), index), (k.input(2), index)],
                           checks=length_checks(k, [(k.input(1), count), (k.input(2), count)]))


@register("GroupNormalization", since=18, until=20)
class GroupNormalization18(GroupNormalizationBase):
    """GroupNormalization-18: scale and bias per group (deprecated: the ONNX checker rejects it)."""
    per_channel = False


@register("GroupNormalization", since=21)
class GroupNormalization(GroupNormalizationBase):
    """GroupNormalization-21: scale and bias per channel."""
