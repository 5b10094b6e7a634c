from ...codegen.literals import float_literal
from ._optimizer import DOMAIN, Optimizer
from .registry import register


@register("Adam", since=1, domain=DOMAIN)
class Adam(Optimizer):
    """One Adam step per tensor: inputs R, T, X..., G..., V..., H...; outputs X_new..., V_new...,
    H_new... with G' = norm_coefficient * X + G, V_new = alpha V + (1 - alpha) G',
    H_new = beta H + (1 - beta) G'^2, R' = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R,
    X_new = (1 - norm_coefficient_post) (X - R' V_new / (sqrt(H_new) + epsilon))."""
    groups_in = 4
    groups_out = 3
    kind = "adam"
    # The ONNX reference evaluator casts every output to float32 when it optimizes several
    # tensors, so folding double tensors through it would lose precision.
    foldable = False

    def scalars(self, node, compute):
        alpha = node.attrs.get("alpha", 0.9)
        beta = node.attrs.get("beta", 0.999)
        post = node.attrs.get("norm_coefficient_post", 0.0)
        return {"norm_coefficient": float_literal(node.attrs.get("norm_coefficient", 0.0), compute),
                "epsilon": float_literal(node.attrs.get("epsilon", 1e-6), compute),
                "alpha": float_literal(alpha, compute), "one_minus_alpha": float_literal(1 - alpha, compute),
                "beta": float_literal(beta, compute), "one_minus_beta": float_literal(1 - beta, compute),
                "alpha_d": float_literal(alpha, "double"), "beta_d": float_literal(beta, "double"),
                "post": float_literal(1 - post, "double") if post != 0 else ""}
