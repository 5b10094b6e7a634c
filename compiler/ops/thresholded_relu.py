from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("ThresholdedRelu", since=10)
class ThresholdedRelu(FloatUnary):
    """Y = X for X > alpha, 0 otherwise."""

    def scalar(self, x, node, t):
        return f"({x} > {float_literal(node.attrs['alpha'], t.compute)} ? {x} : 0)"
