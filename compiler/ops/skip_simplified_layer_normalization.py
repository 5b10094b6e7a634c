"""com.microsoft SkipSimplifiedLayerNormalization: the residual Add and RMS normalization of
T5- and Llama-style layers."""
import numpy as np

from ._contrib import MS, Composite, attributes, rms_inv_std, skip_sum
from .registry import register


@register("SkipSimplifiedLayerNormalization", since=1, domain=MS)
class SkipSimplifiedLayerNormalization(Composite):
    """s = input + skip [+ bias]; output = s / sqrt(mean(s^2) + epsilon) * gamma over the last
    axis. Optional outputs: mean (onnxruntime writes zeros: RMS normalization has none),
    inv_std_var (last axis kept as 1) and s itself."""
    min_inputs = 3

    def expand(self, node, e):
        epsilon = attributes(node, {"epsilon": 1e-12})["epsilon"]
        total = skip_sum(e, node, 3, e.into(3))
        e.op("RMSNormalization", [total, node.inputs[2]], e.into(0), axis=-1, epsilon=epsilon)
        if len(node.outputs) > 1:
            inv_std = rms_inv_std(e, total, node.inputs[0], -1, epsilon, e.into(2))
            e.op("Mul", [inv_std, e.const(np.array(0, node.inputs[0].dtype.np))], e.into(1))
