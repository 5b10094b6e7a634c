from ._softmax import SoftmaxFamily
from .registry import register


@register("LogSoftmax", since=1, until=12)
class LogSoftmax1(SoftmaxFamily):
    """output = x - max - log(sum(exp(x - max))) over the 2-D coercion at axis."""
    mode = "log_softmax"
    coerce_2d = True
    foldable = False  # the ONNX reference evaluator ignores the 2-D coercion


@register("LogSoftmax", since=13)
class LogSoftmax(SoftmaxFamily):
    """output = x - max - log(sum(exp(x - max))) along axis."""
    mode = "log_softmax"
