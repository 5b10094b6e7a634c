from .. import dtypes as dt
from ._copy import Copy
from .registry import register


@register("ZipMap", since=1, domain="ai.onnx.ml")
class ZipMap(Copy):
    """One map per row of X [N, C] (or a single row [C]): class label -> score.

    The generated code keeps the scores as a tensor; the keys are the node's labels, so
    the Python runtime builds the list of dicts (as onnxruntime returns it) from both.
    """

    def in_place(self, node) -> list:
        return []     # the output is a map sequence built from the scores by the runtime

    @staticmethod
    def keys(node) -> list:
        strings = node.attrs.get("classlabels_strings")
        return list(strings) if strings else [int(v) for v in node.attrs.get("classlabels_int64s") or ()]

    def infer(self, node, ctx):
        x = ctx.inp(0)
        keys = self.keys(node)
        if node.attrs.get("classlabels_strings") and node.attrs.get("classlabels_int64s"):
            raise ctx.fail("give classlabels_strings or classlabels_int64s, not both")
        if x.dtype is not dt.FLOAT or not x.is_tensor or x.rank not in (1, 2):
            raise ctx.fail(f"X must be a float [N, C] or [C] tensor, not {x.type_str()}")
        columns = ctx.dims.same(x.shape[-1], len(keys))
        rows = x.shape[0] if x.rank == 2 else 1
        return [(dt.FLOAT, (rows, columns), "map_sequence")]
