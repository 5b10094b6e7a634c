from ._sequence import position, sequence_input
from .registry import OpDef, register


@register("SequenceErase", since=11)
class SequenceErase(OpDef):
    """A copy of the sequence without the element at ``position`` (default: the last)."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        s = sequence_input(ctx, 0)
        position(ctx, 1)
        return [(s.dtype, s.shape, "sequence")]

    def lower(self, node, k):
        return k.kernel("c/sequence_edit.c.j2", seq=k.input(0).data(), out=k.out.data(), insert=None,
                        pos=k.inputs[1].name if k.has_input(1) else None)
