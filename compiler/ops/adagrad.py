from ...codegen.literals import float_literal
from ._optimizer import DOMAIN, Optimizer
from .registry import register


@register("Adagrad", since=1, domain=DOMAIN)
class Adagrad(Optimizer):
    """One ADAGRAD step per tensor: inputs R, T, X..., G..., H...; outputs X_new..., H_new...
    with r = R / (1 + T * decay_factor), G' = norm_coefficient * X + G, H_new = H + G'^2,
    X_new = X - r * G' / (sqrt(H_new) + epsilon)."""
    groups_in = 3
    groups_out = 2
    kind = "adagrad"

    def scalars(self, node, compute):
        return {"norm_coefficient": float_literal(node.attrs.get("norm_coefficient", 0.0), compute),
                "epsilon": float_literal(node.attrs.get("epsilon", 1e-6), compute),
                "decay_factor": float_literal(node.attrs.get("decay_factor", 0.0), "double")}
