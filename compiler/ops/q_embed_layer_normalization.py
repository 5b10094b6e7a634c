"""com.microsoft QEmbedLayerNormalization: EmbedLayerNormalization with 8-bit tables, as
onnxruntime's quantize_dynamic writes it for BERT's fused embedding layer."""
from .. import dtypes as dt
from ._contrib import MS, Composite, Expansion, attributes, invalid, one_value
from .embed_layer_normalization import embed_layer_norm
from .registry import register

# The inputs of the quantized tables; a table's scale is six inputs on, its zero point eleven.
TABLES = {2: "word_embedding", 3: "position_embedding", 4: "segment_embedding", 5: "gamma", 6: "beta"}


@register("QEmbedLayerNormalization", since=1, domain=MS)
class QEmbedLayerNormalization(Composite):
    """Each table is dequantized, (q - zero_point) * scale in float32 as onnxruntime's kernel
    does, then EmbedLayerNormalization with positions 0 .. S-1: layernorm_out, and mask_index_out,
    the number of attended tokens of each row of mask (zeros without one)."""

    def expand(self, node, e):
        epsilon = attributes(node, {"epsilon": 1e-12})["epsilon"]
        ids, segments, mask = node.input(0), node.input(1), node.input(7)
        if ids is None:
            raise invalid(node, "the input_ids input is required")
        with_segments = [node.input(i) is not None for i in (1, 4, 10, 15)]
        if any(with_segments) and not all(with_segments):
            raise invalid(node, "segment_ids, segment_embedding and its scale and zero point go together")
        tables = tuple(None if i == 4 and segments is None else _dequantized(e, node, i) for i in TABLES)
        embed_layer_norm(e, node, ids, segments, tables, mask=mask, position_ids=None, epsilon=epsilon)


def _dequantized(e: Expansion, node, i: int):
    table, scale, zero = node.input(i), node.input(i + 6), node.input(i + 11)
    name = TABLES[i]
    if table is None or scale is None or zero is None:
        raise invalid(node, f"{name}, its scale and its zero point are required")
    if table.dtype not in (dt.INT8, dt.UINT8) or scale.dtype is not dt.FLOAT:
        raise invalid(node, f"{name} must be int8 or uint8 (got {table.dtype}) with a float scale (got {scale.dtype})")
    scalars = [one_value(e, node, v, f"the {name} {what}") for v, what in ((scale, "scale"), (zero, "zero point"))]
    return e.op("DequantizeLinear", [table, *scalars])
