import numpy as np

from ...codegen.literals import c_literal
from .. import dtypes as dt
from ..errors import ShapeError
from .registry import OpDef, register

_NAMES = {"strings": dt.STRING, "int64s": dt.INT64, "floats": dt.FLOAT}


def _listed(attrs, prefix: str):
    """(array, dtype) of the first ``{prefix}_{strings,int64s,floats}`` attribute present."""
    for suffix, dtype in _NAMES.items():
        v = attrs.get(f"{prefix}_{suffix}")
        if v:
            return np.array(list(v), dtype=dtype.np), dtype
    return None, None


@register("LabelEncoder", since=1, domain="ai.onnx.ml")
class LabelEncoder(OpDef):
    """Maps each element through keys -> values; elements that are not a key get the default.

    Keys are sorted at compile time so the kernel binary-searches them (NaN keys match NaN).
    """
    foldable = False

    def mapping(self, node):
        attrs = node.attrs
        x = node.inputs[0]

        def fail(msg):
            return ShapeError(f"{node.label}: {msg}")
        if node.version < 2:  # classes_strings: string <-> its index
            classes = np.array(list(attrs.get("classes_strings") or ()), dtype=object)
            index = np.arange(len(classes), dtype=np.int64)
            if x.dtype is dt.STRING:
                return classes, index, dt.INT64, attrs.get("default_int64", -1)
            return index, classes, dt.STRING, attrs.get("default_string", "_Unused")
        keys = attrs.get("keys_tensor")
        values = attrs.get("values_tensor")
        vtype = dt.from_numpy(values.dtype) if values is not None else None
        if keys is None:
            keys, _ = _listed(attrs, "keys")
        if values is None:
            values, vtype = _listed(attrs, "values")
        if keys is None or values is None:
            raise fail("keys and values are required")
        keys, values = np.asarray(keys).reshape(-1), np.asarray(values).reshape(-1)
        if len(keys) != len(values):
            raise fail(f"{len(keys)} keys but {len(values)} values")
        if dt.from_numpy(keys.dtype) != x.dtype and not (x.dtype is dt.DOUBLE and keys.dtype == np.float64):
            raise fail(f"keys are {dt.from_numpy(keys.dtype)} but X is {x.dtype}")
        default = attrs.get("default_tensor")
        if default is not None:
            default = np.asarray(default).reshape(-1)[0]
        else:
            default = {dt.STRING: attrs.get("default_string", "_Unused"), dt.INT64: attrs.get("default_int64", -1),
                       dt.FLOAT: attrs.get("default_float", -0.0)}.get(vtype, 0)
        return keys, values, vtype, default

    def infer(self, node, ctx):
        *_, vtype, _ = self.mapping(node)
        return [(vtype, ctx.inp(0).shape)]

    def lower(self, node, k):
        keys, values, vtype, default = self.mapping(node)
        x = k.input(0)
        # A repeated key: the last one wins. NaN keys match NaN inputs since opset 4 (before, as
        # in onnxruntime, they match nothing).
        last: dict = {}
        for i, key in enumerate(keys):
            if x.dtype.is_float and np.isnan(key):
                if node.version >= 4:
                    last["nan"] = i
            else:
                last[_as_bytes(key) if x.dtype is dt.STRING else key.item()] = i
        order = [i for key, i in sorted((kv for kv in last.items() if kv[0] != "nan"), key=lambda kv: kv[0])]
        nan_index = None
        if "nan" in last:
            nan_index = len(order)
            order.append(last["nan"])
        return k.kernel("c/label_encoder.c.j2", x=x.data(), y=k.out.data(),
                        keys=[c_literal(keys[i], x.dtype) for i in order],
                        values=[c_literal(values[i], vtype) for i in order],
                        default=c_literal(default, vtype), string=x.dtype is dt.STRING,
                        nan_index=nan_index, is_float=x.dtype.is_float,
                        n=len(order), n_search=nan_index if nan_index is not None else len(order))


def _as_bytes(x) -> bytes:
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)  # strcmp's (unsigned) order
