from ._signal import Window
from .registry import register


@register("HannWindow", since=17)
class HannWindow(Window):
    """Y = the Hann window of length size (periodic or symmetric)."""
    coefficients = (0.5, -0.5)
