from ._signal import Window
from .registry import register


@register("HammingWindow", since=17)
class HammingWindow(Window):
    """Y = the Hamming window of length size (periodic or symmetric)."""
    coefficients = (25.0 / 46.0, -21.0 / 46.0)
