"""com.microsoft BiasAdd: the bias and skip additions of a diffusion model's attention block."""
from ._contrib import MS, Composite, attributes
from .registry import register


@register("BiasAdd", since=1, domain=MS)
class BiasAdd(Composite):
    """Y = X + bias + skip; X and skip (N, S, C), bias (C)."""

    def expand(self, node, e):
        attributes(node, {})
        x, bias, skip = node.inputs[:3]
        e.op("Add", [e.op("Add", [x, bias]), skip], e.into(0))
