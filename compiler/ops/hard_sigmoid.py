from ...codegen.literals import float_literal
from ._unary import FloatUnary, clamp
from .registry import register


@register("HardSigmoid", since=1)
class HardSigmoid(FloatUnary):
    """Y = max(0, min(1, alpha * X + beta))."""

    def scalar(self, x, node, t):
        alpha, beta = (float_literal(node.attrs[a], t.compute) for a in ("alpha", "beta"))
        return clamp(f"({alpha} * {x} + {beta})", "0", "1", ordered=True)
