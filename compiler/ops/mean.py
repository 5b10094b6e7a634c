from .. import dtypes as dt
from ._binary import Folding
from .registry import register


@register("Mean", since=1)
class Mean(Folding):
    """Mean of the inputs, elementwise."""
    types = dt.FLOATS

    def combine(self, acc, x, t):
        return f"{acc} + {x}"

    def finish(self, acc, count, t):
        return f"({acc}) / {count}.0{'f' if t.compute == 'float' else ''}" if count > 1 else acc
