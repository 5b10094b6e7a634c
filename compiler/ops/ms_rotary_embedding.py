"""com.microsoft RotaryEmbedding: onnxruntime's rotary position embedding (Llama, Phi), whose
position_ids are per token or one offset; computed by ai.onnx RotaryEmbedding."""
import numpy as np

from ._contrib import MS, Composite, attributes, invalid, refuse
from .registry import register


@register("RotaryEmbedding", since=1, domain=MS)
class MsRotaryEmbedding(Composite):
    """ai.onnx RotaryEmbedding of input (B, S, hidden) or (B, N, S, d) with the cache rows of
    position_ids (B, S), or of offset + 0, 1, ... S-1 when position_ids holds one value."""

    def expand(self, node, e):
        attrs = attributes(node, {"num_heads": 0, "rotary_embedding_dim": 0, "interleaved": 0,
                                  "is_packed_batching": 0, "scale": 1.0})
        if attrs["is_packed_batching"]:
            raise refuse(node, "is_packed_batching=1")
        if attrs["scale"] != 1.0:
            raise refuse(node, f"scale={attrs['scale']}")
        x, positions, cos, sin = node.inputs[:4]
        heads = int(attrs["num_heads"])
        if len(x.shape) == 3 and not heads:
            half, hidden = cos.shape[-1], x.shape[-1]
            if attrs["rotary_embedding_dim"] or not isinstance(half, int) or not isinstance(hidden, int) \
                    or hidden % (2 * half):
                raise invalid(node, "a 3-D input needs num_heads")
            heads = hidden // (2 * half)
        if len(positions.shape) != 2:
            positions = self._offset_positions(e, x, positions)
        extra = {"num_heads": heads} if len(x.shape) == 3 else {}
        e.op("RotaryEmbedding", [x, cos, sin, positions], e.into(0), interleaved=attrs["interleaved"],
             rotary_embedding_dim=attrs["rotary_embedding_dim"], **extra)

    @staticmethod
    def _offset_positions(e, x, offset):
        """(B, S) positions offset, offset + 1, ... offset + S - 1 for every batch row."""
        seq_axis = 1 if len(x.shape) == 3 else 2
        seq = e.op("Shape", [x], start=seq_axis, end=seq_axis + 1)
        start = e.op("Reshape", [offset, e.const(np.array([], np.int64))])
        steps = e.op("Range", [start, e.op("Add", [start, e.op("Squeeze", [seq])]), e.const(np.array(1, np.int64))])
        shape = e.op("Concat", [e.op("Shape", [x], start=0, end=1), seq], axis=0)
        return e.op("Expand", [steps, shape])
