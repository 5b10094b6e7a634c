from ...codegen.literals import float_literal
from ._optimizer import DOMAIN, Optimizer
from .registry import register

MODES = ("standard", "nesterov")


@register("Momentum", since=1, domain=DOMAIN)
class Momentum(Optimizer):
    """One SGD-with-momentum step per tensor: inputs R, T, X..., G..., V...; outputs X_new...,
    V_new... with G' = norm_coefficient * X + G, V_new = alpha V + (T > 0 ? beta : 1) G', and
    X_new = X - R V_new (mode "standard") or X - R (G' + alpha V_new) (mode "nesterov")."""
    groups_in = 3
    groups_out = 2

    def check_attrs(self, node, ctx):
        for name in ("alpha", "beta", "norm_coefficient", "mode"):
            if name not in node.attrs:
                raise ctx.fail(f"attribute {name!r} is required")
        if node.attrs["mode"] not in MODES:
            raise ctx.fail(f"mode {node.attrs['mode']!r} is not one of {', '.join(MODES)}")

    def scalars(self, node, compute):
        return {"kind": "nesterov" if node.attrs["mode"] == "nesterov" else "momentum",
                "norm_coefficient": float_literal(node.attrs["norm_coefficient"], compute),
                "alpha": float_literal(node.attrs["alpha"], compute),
                "beta": float_literal(node.attrs["beta"], compute)}
