from ._control import known_symbols, merged_dim
from ._sequence import position, require_rank, sequence_input
from .registry import OpDef, register


@register("SequenceAt", since=11)
class SequenceAt(OpDef):
    """A copy of the tensor at ``position`` (negative counts from the end)."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        s = sequence_input(ctx, 0)
        if position(ctx, 1) is None:
            raise ctx.fail("the position is required")
        require_rank(node, s)
        known = known_symbols(node)
        return [(s.dtype, tuple(merged_dim(node, ctx.dims, f"0[{a}]", [d], known) for a, d in enumerate(s.shape)))]

    def lower(self, node, k):
        return k.kernel("c/sequence_at.c.j2", allocates=True, seq=k.input(0).data(), pos=k.input(1).name,
                        out={"name": k.out.name, "dims": k.output_dims(0), "itemsize": k.out.dtype.itemsize})
