from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim
from ._map import map_input
from .registry import OpDef, register

_CAST_TO = {"TO_FLOAT": dt.FLOAT, "TO_INT64": dt.INT64, "TO_STRING": dt.STRING}
# onnxruntime fills a SPARSE row of strings with "0.f" (a float literal's spelling, kept as it writes it)
_SPARSE_ZERO = {dt.FLOAT: "0", dt.INT64: "0", dt.STRING: '"0.f"'}


@register("CastMap", since=1, domain="ai.onnx.ml")
class CastMap(OpDef):
    """Y[0, :] = the map's values cast to ``cast_to``, in ascending key order (DENSE), or at
    their keys' positions in a row of ``max_map`` zeros (SPARSE: keys from max_map on are
    dropped, a negative key is an error)."""

    def infer(self, node, ctx):
        cast_to, form = node.attrs["cast_to"], node.attrs["map_form"]
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
        cast, helpers = "values[i]", ()
        if y.dtype is dt.INT64:
            cast, helpers = "onnxc_sat_double_to_int64((double)values[i])", ("c/helpers/sat_double_to_int.c.j2",)
        elif y.dtype is dt.STRING:
            cast, helpers = "onnxc_fixed_to_str(ctx, (double)values[i])", ("c/helpers/strings.c.j2",
                                                                          "c/helpers/string_cast.c.j2")
        kernel = k.kernel("c/cast_map.c.j2", X=x.name, Y=y.name, ctype=y.ctype, cast=cast, zero=_SPARSE_ZERO[y.dtype],
                          sparse=node.attrs["map_form"] == "SPARSE", width=cexpr.lit(y.dims[1]), helpers=helpers)
        if k.data_dims:
            kernel.shape_template = "c/cast_map_shape.c.j2"
            kernel.shape_data = {"X": x.name}
        return kernel
