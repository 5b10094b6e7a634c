from ._loss import infer_loss, lower_loss
from .registry import OpDef, register


@register("SoftmaxCrossEntropyLoss", since=12)
class SoftmaxCrossEntropyLoss(OpDef):
    """Negative log likelihood of log_softmax(scores) over the class axis; optional log_prob output."""

    def infer(self, node, ctx):
        return infer_loss(node, ctx, log_softmax=True)

    def lower(self, node, k):
        return lower_loss(node, k, log_softmax=True)
