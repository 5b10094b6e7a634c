"""Shared checks of the ai.onnx.ml operators that read a map input."""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Value
from .registry import InferContext

ANY_VALUE = (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.STRING)


def map_input(ctx: InferContext, keys: tuple[dt.DType, ...], values: tuple[dt.DType, ...]) -> Value:
    """Input 0, checked to be a map whose key and value types are among those given."""
    x = ctx.inp(0)
    if x.kind != "map":
        raise ctx.fail(f"X must be a map, not {x.type_str()}")
    if x.key_dtype not in keys or x.dtype not in values:
        raise ctx.fail(f"X is {x.type_str()}: keys must be {' or '.join(t.name for t in keys)}, values "
                       f"{' or '.join(t.name for t in values)}")
    return x
