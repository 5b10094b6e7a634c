"""com.microsoft FusedGemm: Gemm followed by an activation (onnxruntime's Gemm -> activation fusion)."""
from ._contrib import MS, Composite, attributes, refuse
from .registry import register

# activation -> which of its attributes come from activation_alpha, activation_beta, activation_gamma
_ACTIVATIONS = {"Relu": (), "Tanh": (), "Sigmoid": (), "Softsign": (), "Softplus": (),
                "LeakyRelu": ("alpha",), "Elu": ("alpha",), "ThresholdedRelu": ("alpha",),
                "HardSigmoid": ("alpha", "beta"), "Selu": ("alpha", "gamma")}


@register("FusedGemm", since=1, domain=MS)
class FusedGemm(Composite):
    """Y = activation(alpha * A' B' + beta * C), Gemm's attributes plus ``activation`` (an ONNX op
    name) whose alpha, beta, gamma are activation_alpha, activation_beta, activation_gamma."""

    def expand(self, node, e):
        attrs = attributes(node, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, "activation": None,
                                  "activation_alpha": None, "activation_beta": None, "activation_gamma": None})
        act = attrs.get("activation")
        if act not in _ACTIVATIONS:
            raise refuse(node, f"activation {act!r}")
        gemm = e.op("Gemm", node.inputs[:3], **{a: attrs[a] for a in ("alpha", "beta", "transA", "transB")})
        params = {name: attrs[f"activation_{name}"] for name in _ACTIVATIONS[act] if f"activation_{name}" in attrs}
        e.op(act, [gemm], e.into(0), **params)
