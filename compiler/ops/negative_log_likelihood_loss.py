from ._loss import infer_loss, lower_loss
from .registry import OpDef, register


@register("NegativeLogLikelihoodLoss", since=12)
class NegativeLogLikelihoodLoss(OpDef):
    """loss = -input[n, target[n, d...], d...] * weight[target], optionally summed or averaged."""

    def infer(self, node, ctx):
        return infer_loss(node, ctx, log_softmax=False)

    def lower(self, node, k):
        return lower_loss(node, k, log_softmax=False)
