from ._softmax import SoftmaxFamily
from .registry import register


@register("Softmax", since=1, until=12)
class Softmax1(SoftmaxFamily):
    """output = exp(x - max) / sum(exp(x - max)) over the 2-D coercion at axis."""
    mode = "softmax"
    coerce_2d = True
    foldable = False  # the ONNX reference evaluator ignores the 2-D coercion


@register("Softmax", since=13)
class Softmax(SoftmaxFamily):
    """output = exp(x - max) / sum(exp(x - max)) along axis."""
    mode = "softmax"
