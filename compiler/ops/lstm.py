from ._recurrent import Recurrent
from .registry import register


@register("LSTM", since=1)
class LSTM(Recurrent):
    """Long short-term memory: gates i, o, f, c with optional peepholes; outputs Y, Y_h, Y_c."""
    kind = "lstm"
    gates = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh")
    outputs = 3
