"""com.microsoft SkipLayerNormalization: the residual Add and LayerNormalization of a BERT layer."""
from ._contrib import MS, Composite, attributes, skip_sum
from .registry import register


@register("SkipLayerNormalization", since=1, domain=MS)
class SkipLayerNormalization(Composite):
    """s = input + skip [+ bias]; output = LayerNormalization(s, gamma, beta) over the last axis.
    Optional outputs: mean and inv_std_var of each row (last axis kept as 1) and s itself."""
    min_inputs = 3

    def expand(self, node, e):
        epsilon = attributes(node, {"epsilon": 1e-12})["epsilon"]
        total = skip_sum(e, node, 4, e.into(3))
        inputs = [total, node.inputs[2]] + ([node.inputs[3]] if node.input(3) is not None else [])
        e.op("LayerNormalization", inputs, node.outputs[:3], axis=-1, epsilon=epsilon)
