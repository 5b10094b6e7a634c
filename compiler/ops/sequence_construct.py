from ._control import element_shape
from .registry import OpDef, register


@register("SequenceConstruct", since=11)
class SequenceConstruct(OpDef):
    """A sequence holding copies of the inputs, in order."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        if not xs or any(x.dtype != xs[0].dtype or not x.is_tensor for x in xs):
            raise ctx.fail("the inputs must be one or more tensors of one element type")
        return [(xs[0].dtype, element_shape(ctx.dims, [x.shape for x in xs], node.label), "sequence")]

    def lower(self, node, k):
        return k.kernel("c/sequence_new.c.j2", out=k.out.data(), items=[t.data() for t in k.inputs], none=False)
