import numpy as np
import onnx
from onnx import numpy_helper

from ...codegen.literals import c_literals
from .. import dtypes as dt
from ..errors import ModelError, UnsupportedError
from ..ir import Node
from .registry import OpDef, register

# Larger constants are left to constant folding (optimization level 1 and up).
MAX_LOWERED_ELEMENTS = 1 << 16
VALUES_PER_LINE = 8


def constant_value(node: Node) -> np.ndarray:
    """The value of a Constant node from its one value* attribute."""
    given = [name for name in node.attrs if name.startswith("value") or name == "sparse_value"]
    if len(given) != 1:
        raise ModelError(f"{node.label}: exactly one value attribute is required, got {given or 'none'}")
    name, value = given[0], node.attrs[given[0]]
    if name in ("value_string", "value_strings"):
        raise UnsupportedError(f"{node.label}: string constants are not supported")
    if name == "value_float":
        return np.array(value, dtype=np.float32)
    if name == "value_floats":
        return np.array(value, dtype=np.float32).reshape(len(value))
    if name == "value_int":
        return np.array(value, dtype=np.int64)
    if name == "value_ints":
        return np.array(value, dtype=np.int64).reshape(len(value))
    if name == "sparse_value":
        return _dense(value)
    return value


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A SparseTensorProto as a dense array (indices: linear [NNZ] or coordinates [NNZ, rank])."""
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    shape = tuple(int(d) for d in sparse.dims)
    out = np.zeros(int(np.prod(shape)), dtype=values.dtype)
    if indices.ndim == 2:
        indices = np.ravel_multi_index(tuple(indices.T), shape) if indices.size else indices.reshape(0)
    out[indices] = values
    return out.reshape(shape)


@register("Constant", since=1)
class Constant(OpDef):
    """output = the value attribute (folded at compile time from optimization level 1)."""

    def infer(self, node, ctx):
        value = constant_value(node)
        if "sparse_value" in node.attrs:  # constant folding's evaluator cannot return sparse tensors
            del node.attrs["sparse_value"]
            node.attrs["value"] = value
        return [(dt.from_numpy(value.dtype), tuple(value.shape))]

    def lower(self, node, k):
        value, y = constant_value(node), k.out
        if value.size > MAX_LOWERED_ELEMENTS:
            raise k.unsupported(f"a constant of {value.size} elements needs optimization level 1 or more")
        literals = c_literals(value, y.dtype)
        rows = [literals[i:i + VALUES_PER_LINE] for i in range(0, len(literals), VALUES_PER_LINE)]
        return k.kernel("c/constant.c.j2", ctype=y.ctype, count=len(literals), rows=rows, output=y.name)
