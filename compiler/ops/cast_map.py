from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._indexing import data_dim
from ._map import map_input
from .registry import OpDef, register

_CAST_TO = {"TO_FLOAT": dt.FLOAT, "TO_INT64": dt.INT64}


@register("CastMap", since=1, domain="ai.onnx.ml")
class CastMap(OpDef):
    """Y[0, :] = the map's values cast to ``cast_to``, in ascending key order (DENSE), or at
    their keys' positions in a row of ``max_map`` zeros (SPARSE: keys from max_map on are
    dropped, a negative key is an error)."""

    def infer(self, node, ctx):
        cast_to, form = node.attrs["cast_to"], node.attrs["map_form"]
        if cast_to == "TO_STRING":
            raise UnsupportedError(f"CastMap {node.name!r}: cast_to TO_STRING is not supported")
        if cast_to not in _CAST_TO:
            raise ctx.fail(f"cast_to must be TO_FLOAT, TO_STRING or TO_INT64, not {cast_to!r}")
        map_input(ctx, (dt.INT64,), (dt.FLOAT,))
        if form == "DENSE":
            return [(_CAST_TO[cast_to], (1, data_dim(ctx, node)))]
        if form != "SPARSE":
            raise ctx.fail(f"map_form must be DENSE or SPARSE, not {form!r}")
        if node.attrs["max_map"] < 1:
            raise ctx.fail(f"max_map must be at least 1, not {node.attrs['max_map']}")
        return [(_CAST_TO[cast_to], (1, node.attrs["max_map"]))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        to_int = y.dtype is dt.INT64
        kernel = k.kernel("c/cast_map.c.j2", X=x.name, Y=y.name, ctype=y.ctype,
                          cast="onnxc_sat_double_to_int64((double)values[i])" if to_int else "values[i]",
                          sparse=node.attrs["map_form"] == "SPARSE", width=cexpr.lit(y.dims[1]),
                          helpers=("c/helpers/sat_double_to_int.c.j2",) if to_int else ())
        if k.data_dims:
            kernel.shape_template = "c/cast_map_shape.c.j2"
            kernel.shape_data = {"X": x.name}
        return kernel
