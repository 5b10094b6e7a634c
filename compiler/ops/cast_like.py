from .cast import cast_kernel
from .registry import OpDef, register


@register("CastLike", since=15)
class CastLike(OpDef):
    """output = input converted to the type of target_type."""

    def infer(self, node, ctx):
        return [(ctx.inp(1).dtype, ctx.inp(0).shape)]

    def lower(self, node, k):
        kernel = cast_kernel(k)
        kernel.template = "c/cast_like.c.j2"
        kernel.data["like"] = k.input(1).name
        return kernel
