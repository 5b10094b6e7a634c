from ._unary import FloatUnary, flit, math_fn
from .registry import register


@register("Selu", since=1)
class Selu(FloatUnary):
    """Y = gamma * X for X > 0, gamma * (alpha * exp(X) - alpha) otherwise."""

    def scalar(self, x, node, t):
        alpha, gamma = (flit(node.attrs[a], t.compute) for a in ("alpha", "gamma"))
        exp = math_fn("exp", t.compute)
        return f"({x} > 0 ? {gamma} * {x} : {gamma} * ({alpha} * {exp}({x}) - {alpha}))"
