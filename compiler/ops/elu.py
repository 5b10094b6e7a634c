from ._unary import FloatUnary, flit, math_fn
from .registry import register


@register("Elu", since=1)
class Elu(FloatUnary):
    """Y = X for X >= 0, alpha * (exp(X) - 1) otherwise."""

    def scalar(self, x, node, t):
        alpha = flit(node.attrs["alpha"], t.compute)
        return f"({x} >= 0 ? {x} : {alpha} * {math_fn('expm1', t.compute)}({x}))"
