import math

from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from ._unary import FloatUnary
from .registry import register


@register("Gelu", since=20)
class Gelu(FloatUnary):
    """Y = 0.5 * X * (1 + erf(X / sqrt(2))), or its tanh approximation."""

    def infer(self, node, ctx):
        if node.attrs["approximate"] not in ("none", "tanh"):
            raise ctx.fail(f"approximate must be 'none' or 'tanh', got {node.attrs['approximate']!r}")
        return super().infer(node, ctx)

    def scalar(self, x, node, t):
        c = t.compute
        if node.attrs["approximate"] == "tanh":
            inner = f"{float_literal(math.sqrt(2 / math.pi), c)} * ({x} + {float_literal(0.044715, c)} * {x} * {x} * {x})"
            return f"{float_literal(0.5, c)} * {x} * (1 + {math_fn('tanh', c)}({inner}))"
        return f"{float_literal(0.5, c)} * {x} * (1 + {math_fn('erf', c)}({x} * {float_literal(1 / math.sqrt(2), c)}))"
