from .. import dtypes as dt
from .registry import OpDef, register


@register("SequenceEmpty", since=11)
class SequenceEmpty(OpDef):
    """An empty sequence of ``dtype`` tensors (float by default)."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        dtype = node.attrs.get("dtype")
        return [(dt.from_onnx(dtype) if dtype is not None else dt.FLOAT, None, "sequence")]

    def lower(self, node, k):
        return k.kernel("c/sequence_new.c.j2", out=k.out.data(), items=[], none=False)
