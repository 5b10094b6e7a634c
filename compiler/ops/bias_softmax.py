"""com.microsoft BiasSoftmax: softmax of attention scores plus an additive mask."""
from ._contrib import MS, Composite, attributes, invalid
from .registry import register


@register("BiasSoftmax", since=1, domain=MS)
class BiasSoftmax(Composite):
    """output = softmax(data + bias), bias broadcast onto data; as Softmax-11, the softmax runs
    over the axes from ``axis`` on flattened into one. ``is_inner_broadcast`` says on which
    side of the batch axes the bias repeats, which numpy broadcasting of its shape already tells."""

    def expand(self, node, e):
        attrs = attributes(node, {"axis": 1, "is_inner_broadcast": None})
        if "is_inner_broadcast" not in attrs:
            raise invalid(node, "the is_inner_broadcast attribute is required")
        data = node.inputs[0]
        scores = e.op("Add", node.inputs[:2])
        rows = e.op("Flatten", [scores], axis=attrs["axis"])
        e.op("Reshape", [e.op("Softmax", [rows], axis=-1), e.op("Shape", [data])], e.into(0))
