import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from .label_encoder import LabelEncoder
from .registry import register


@register("CategoryMapper", since=1, domain="ai.onnx.ml")
class CategoryMapper(LabelEncoder):
    """Maps strings to int64 (cats_strings[i] -> cats_int64s[i], else default_int64) or int64 to
    strings (the other way, else default_string), by the type of X."""

    def mapping(self, node):
        attrs, x = node.attrs, node.inputs[0]
        strings = np.array(list(attrs.get("cats_strings") or ()), dtype=object)
        ints = np.array(list(attrs.get("cats_int64s") or ()), dtype=np.int64)
        if len(strings) != len(ints):
            raise ShapeError(f"{node.label}: {len(strings)} cats_strings but {len(ints)} cats_int64s")
        if x.dtype is dt.STRING:
            return strings, ints, dt.INT64, attrs.get("default_int64", -1)
        if x.dtype is dt.INT64:
            return ints, strings, dt.STRING, attrs.get("default_string", "_Unused")
        raise ShapeError(f"{node.label}: X must be string or int64, got {x.dtype}")
