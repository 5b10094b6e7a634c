from ._control import known_symbols, merged_dim
from ._sequence import require_rank, sequence_input
from .registry import OpDef, register


@register("ConcatFromSequence", since=11)
class ConcatFromSequence(OpDef):
    """The sequence's tensors joined along ``axis`` (stacked on a new axis if ``new_axis``)."""
    foldable = False
    allocates_outputs = True

    def _axis(self, node, ctx, s):
        require_rank(node, s)
        new_axis = node.attrs.get("new_axis", 0)
        rank = len(s.shape) + (1 if new_axis else 0)
        axis = node.attrs["axis"]
        if not -rank <= axis < rank:
            raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
        return (axis + rank if axis < 0 else axis), bool(new_axis)

    def infer(self, node, ctx):
        s = sequence_input(ctx, 0)
        axis, new_axis = self._axis(node, ctx, s)
        known = known_symbols(node)
        elem = [merged_dim(node, ctx.dims, f"0[{a}]", [d], known) for a, d in enumerate(s.shape)]
        joined = merged_dim(node, ctx.dims, "joined", [None], known)
        shape = elem[:axis] + [joined] + (elem[axis:] if new_axis else elem[axis + 1:])
        return [(s.dtype, tuple(shape))]

    def lower(self, node, k):
        s = node.inputs[0]
        axis, new_axis = self._axis(node, k, s)
        return k.kernel("c/concat_from_sequence.c.j2", allocates=True, seq=k.input(0).data(), axis=axis, new_axis=new_axis,
                        elem_rank=len(s.shape), out={"name": k.out.name, "dims": k.output_dims(0),
                                                     "itemsize": k.out.dtype.itemsize})
