import math

from ._unary import FloatUnary, flit, math_fn
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
            inner = f"{flit(math.sqrt(2 / math.pi), c)} * ({x} + {flit(0.044715, c)} * {x} * {x} * {x})"
            return f"{flit(0.5, c)} * {x} * (1 + {math_fn('tanh', c)}({inner}))"
        return f"{flit(0.5, c)} * {x} * (1 + {math_fn('erf', c)}({x} * {flit(1 / math.sqrt(2), c)}))"
