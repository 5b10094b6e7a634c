from .. import dtypes as dt
from ..errors import UnsupportedError
from .registry import OpDef, register


@register("Optional", since=15)
class Optional(OpDef):
    """An optional holding a copy of the input, or (no input) an empty one of ``type``."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        x = node.input(0)
        if x is not None:
            if x.kind not in ("tensor", "sequence"):
                raise ctx.fail(f"cannot wrap {x.type_str()} in an optional")
            return [(x.dtype, x.shape, "optional" if x.is_tensor else "optional_sequence")]
        tp = node.attrs.get("type")
        if tp is None:
            raise ctx.fail("an Optional without input needs the type attribute")
        which = tp.WhichOneof("value")
        if which == "tensor_type":
            return [(dt.from_onnx(tp.tensor_type.elem_type), None, "optional")]
        if which == "sequence_type" and tp.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
            return [(dt.from_onnx(tp.sequence_type.elem_type.tensor_type.elem_type), None, "optional_sequence")]
        raise UnsupportedError(f"{node.label}: optional of {which} is not supported")

    def lower(self, node, k):
        x = k.inputs[0] if k.has_input(0) else None
        if x is not None and x.kind == "sequence":
            return k.kernel("c/sequence_clone.c.j2", seq=x.data(), out=k.out.data())
        return k.kernel("c/sequence_new.c.j2", out=k.out.data() | {"elem_rank": x.rank if x is not None else -1},
                        items=[x.data()] if x is not None else [], none=x is None)
