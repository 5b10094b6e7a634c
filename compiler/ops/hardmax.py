from ._softmax import SoftmaxFamily
from .registry import register


@register("Hardmax", since=1, until=12)
class Hardmax1(SoftmaxFamily):
    """output = 1 at the first maximum of the 2-D coercion's row at axis, 0 elsewhere."""
    mode = "hardmax"
    coerce_2d = True
    foldable = False  # the ONNX reference evaluator ignores the 2-D coercion


@register("Hardmax", since=13)
class Hardmax(SoftmaxFamily):
    """output = 1 at the first maximum along axis, 0 elsewhere."""
    mode = "hardmax"
