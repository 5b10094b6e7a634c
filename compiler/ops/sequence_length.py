from .. import dtypes as dt
from ._sequence import sequence_input
from .registry import OpDef, register


@register("SequenceLength", since=11)
class SequenceLength(OpDef):
    """The number of tensors in the sequence, as an int64 scalar."""
    foldable = False

    def infer(self, node, ctx):
        sequence_input(ctx, 0)
        return [(dt.INT64, ())]

    def lower(self, node, k):
        return k.kernel("c/sequence_length.c.j2", seq=k.input(0).data(), out=k.out.data())
