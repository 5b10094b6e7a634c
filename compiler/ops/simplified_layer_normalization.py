"""SimplifiedLayerNormalization: onnxruntime's RMS normalization, which it registers in the
ai.onnx domain (its optimizer writes it for T5 and Llama models)."""
from ._contrib import Composite, attributes, rms_inv_std
from .registry import register


@register("SimplifiedLayerNormalization", since=1)
class SimplifiedLayerNormalization(Composite):
    """Y = X / sqrt(mean(X^2) + epsilon) * scale over the axes from axis on; optional
    inv_std_var with those axes kept as 1s."""

    def expand(self, node, e):
        attrs = attributes(node, {"axis": -1, "epsilon": 1e-5, "stash_type": 1})
        x = node.inputs[0]
        e.op("RMSNormalization", node.inputs[:2], e.into(0), axis=attrs["axis"], epsilon=attrs["epsilon"],
             stash_type=attrs["stash_type"])
        if len(node.outputs) > 1:
            rms_inv_std(e, x, x, attrs["axis"], attrs["epsilon"], e.into(1))
