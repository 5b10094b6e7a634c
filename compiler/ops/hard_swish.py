from ...codegen.literals import float_literal
from ._unary import FloatUnary, clamp
from .registry import register


@register("HardSwish", since=14)
class HardSwish(FloatUnary):
    """Y = X * max(0, min(1, X / 6 + 0.5)) (HardSigmoid with alpha 1/6, beta 0.5)."""

    def scalar(self, x, node, t):
        alpha, beta = float_literal(1 / 6, t.compute), float_literal(0.5, t.compute)
        return f"{x} * {clamp(f'({alpha} * {x} + {beta})', '0', '1', ordered=True)}"
