from ._recurrent import Recurrent
from .registry import register


@register("GRU", since=1)
class GRU(Recurrent):
    """Gated recurrent unit: update z, reset r, candidate h (gates zrh), H_t = (1 - z) h + z H_{t-1}."""
    kind = "gru"
    gates = 3
    default_activations = ("Sigmoid", "Tanh", "Sigmoid", "Tanh")
