from ._signal import Window
from .registry import register


@register("BlackmanWindow", since=17)
class BlackmanWindow(Window):
    """Y = the Blackman window of length size (periodic or symmetric)."""
    coefficients = (0.42, -0.5, 0.08)
