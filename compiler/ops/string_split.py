from ...codegen.literals import c_literal
from .. import dtypes as dt
from .registry import OpDef, register


@register("StringSplit", since=20)
class StringSplit(OpDef):
    """Each string split at ``delimiter`` (unset or empty: at runs of whitespace, like Python's
    ``str.split()``), at most ``maxsplit`` times; Y pads with "" to the longest split, Z counts."""
    foldable = False

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype is not dt.STRING:
            raise ctx.fail(f"X must be string, not {x.dtype}")
        width = ctx.dims.data(f"{node.label} pieces")
        return [(dt.STRING, x.shape + (width,)), (dt.INT64, x.shape)]

    def _data(self, node, k):
        delimiter = node.attrs.get("delimiter") or ""
        maxsplit = node.attrs.get("maxsplit")
        return {"x": k.input(0).data(), "delimiter": c_literal(delimiter, dt.STRING), "delim_len": len(delimiter.encode()),
                "maxsplit": -1 if maxsplit is None else int(maxsplit)}

    def lower(self, node, k):
        kernel = k.kernel("c/string_split.c.j2", y=k.outputs[0].data(), z=k.outputs[1].data(), shape=False,
                          **self._data(node, k))
        kernel.shape_template = "c/string_split.c.j2"
        kernel.shape_data = self._data(node, k) | {"shape": True, "ptr": k.data_dim_ptr(k.outputs[0].dims[-1]),
                                                    "y": k.outputs[0].data(), "z": k.outputs[1].data()}
        kernel.helpers.append("c/helpers/strings.c.j2")
        return kernel
