"""Shared checks of the ai.onnx.ml operators that read a map input."""
from .. import dtypes as dt


def map_input(ctx, keys: tuple, values: tuple):
    """Input 0 as a map whose key and value types are among those given."""
    x = ctx.inp(0)
    if x.kind != "map":
        raise ctx.fail(f"X must be a map, not {x.type_str()}")
    if x.key_dtype not in keys or x.dtype not in values:
        allowed = " or ".join(t.name for t in keys)
        raise ctx.fail(f"X is {x.type_str()}: keys must be {allowed}, values "
                       + " or ".join(t.name for t in values))
    return x


ANY_VALUE = (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.STRING)
