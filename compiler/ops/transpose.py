from ._indexing import norm_axes, permuted_strides, strided_copy
from .registry import OpDef, register


def _perm(node, rank: int) -> list[int]:
    perm = node.attrs.get("perm")
    return [p % rank for p in perm] if perm else list(range(rank))[::-1]


@register("Transpose", since=1)
class Transpose(OpDef):
    """Y = X with its axes permuted by perm (default: reversed)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        rank = len(x.shape)
        perm = node.attrs.get("perm")
        if perm and (len(perm) != rank or len(norm_axes(ctx, perm, rank, "perm")) != rank):
            raise ctx.fail(f"perm {list(perm)} is not a permutation of {rank} axes")
        return [(x.dtype, tuple(x.shape[p] for p in _perm(node, rank)))]

    def lower(self, node, k):
        x = k.input(0)
        return strided_copy(k, x, k.out.dims, permuted_strides(x.dims, _perm(node, x.rank)))
