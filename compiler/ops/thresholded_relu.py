from ._unary import FloatUnary, flit
from .registry import register


@register("ThresholdedRelu", since=10)
class ThresholdedRelu(FloatUnary):
    """Y = X for X > alpha, 0 otherwise."""

    def scalar(self, x, node, t):
        return f"({x} > {flit(node.attrs['alpha'], t.compute)} ? {x} : 0)"
