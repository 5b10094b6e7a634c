"""com.microsoft EmbedLayerNormalization: BERT's word, position and segment embedding lookups,
their sum and its LayerNormalization, plus the number of attended tokens per batch row."""
import numpy as np

from ._contrib import MS, Composite, Expansion, attributes
from .registry import register


@register("EmbedLayerNormalization", since=1, domain=MS)
class EmbedLayerNormalization(Composite):
    """s = word_embedding[input_ids] + position_embedding[position_ids] (0, 1, ... S-1 when
    omitted) [+ segment_embedding[segment_ids]]; output = LayerNormalization(s, gamma, beta) over
    the hidden axis; mask_index = the sum of each row of mask (zeros without one); embedding_sum = s."""

    def expand(self, node, e):
        epsilon = attributes(node, {"epsilon": 1e-12, "mask_index_type": None})["epsilon"]
        ids, segments, words, positions, segment_table, gamma, beta = (node.input(i) for i in range(7))
        embed_layer_norm(e, node, ids, segments, (words, positions, segment_table, gamma, beta),
                         mask=node.input(7), position_ids=node.input(8), epsilon=epsilon)


def embed_layer_norm(e: Expansion, node, ids, segments, tables: tuple, mask, position_ids, epsilon: float) -> None:
    """EmbedLayerNormalization's outputs from float ``tables`` (word, position and segment
    embeddings (None without segments), gamma, beta), into the node's outputs."""
    words, positions, segment_table, gamma, beta = tables
    total = e.op("Gather", [words, ids], axis=0)
    if position_ids is None:
        count = e.op("Shape", [ids], start=1, end=2)
        position_rows = e.op("Slice", [positions, e.const(np.array([0], np.int64)), count,
                                       e.const(np.array([0], np.int64))])
    else:
        position_rows = e.op("Gather", [positions, position_ids], axis=0)
    last = e.into(2) if segments is None else None
    total = e.op("Add", [total, position_rows], last)
    if segments is not None:
        total = e.op("Add", [total, e.op("Gather", [segment_table, segments], axis=0)], e.into(2))
    e.op("LayerNormalization", [total, gamma, beta], e.into(0), axis=-1, epsilon=epsilon)
    if len(node.outputs) > 1:
        rows = mask if mask is not None else e.op("Mul", [ids, e.const(np.array(0, ids.dtype.np))])
        count = e.op("ReduceSum", [rows, e.const(np.array([1], np.int64))], keepdims=0)
        e.op("Cast", [count], e.into(1), to=6)
