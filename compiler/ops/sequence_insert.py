from ._control import element_shape
from ._sequence import position, sequence_input
from .registry import OpDef, register


@register("SequenceInsert", since=11)
class SequenceInsert(OpDef):
    """A copy of the sequence with a copy of ``tensor`` inserted at ``position`` (default: the end)."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        s = sequence_input(ctx, 0)
        x = ctx.inp(1)
        position(ctx, 2)
        if x.dtype != s.dtype or not x.is_tensor:
            raise ctx.fail(f"cannot insert {x.type_str()} into {s.type_str()}")
        return [(s.dtype, element_shape(ctx.dims, [s.shape, x.shape], node.label), "sequence")]

    def lower(self, node, k):
        return k.kernel("c/sequence_edit.c.j2", seq=k.input(0).data(), out=k.out.data(), insert=k.input(1).data(),
                        pos=k.inputs[2].name if k.has_input(2) else None)
