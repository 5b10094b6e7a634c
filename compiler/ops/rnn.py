from ._recurrent import Recurrent
from .registry import register


@register("RNN", since=1)
class RNN(Recurrent):
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb) over the sequence, per direction."""
    kind = "rnn"
    gates = 1
    default_activations = ("Tanh", "Tanh")
