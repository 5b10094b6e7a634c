from .. import dtypes as dt
from ..errors import ShapeError, UnsupportedError
from ._control import element_shape
from .registry import OpDef, register


@register("SplitToSequence", since=11)
class SplitToSequence(OpDef):
    """Pieces of the input along ``axis``: of size ``split`` (a scalar: the last piece may be
    shorter), of the sizes listed in ``split``, or of size 1 (axis dropped unless keepdims)."""
    foldable = False
    allocates_outputs = True

    @staticmethod
    def _axis(node):
        x = node.inputs[0]
        axis = node.attrs.get("axis", 0)
        if not -x.rank <= axis < x.rank:
            raise ShapeError(f"{node.label}: axis {axis} is out of range for rank {x.rank}")
        return axis + x.rank if axis < 0 else axis

    def infer(self, node, ctx):
        x = ctx.inp(0)
        axis = self._axis(node)
        split = node.input(1)
        if split is not None and (split.dtype not in (dt.INT32, dt.INT64) or split.rank > 1):
            raise ctx.fail("split must be an int32/int64 scalar or 1-D tensor")
        if split is None and not node.attrs.get("keepdims", 1):
            shape = x.shape[:axis] + x.shape[axis + 1:]
        else:
            shape = x.shape[:axis] + (ctx.dims.data(f"{node.label} piece", "e"),) + x.shape[axis + 1:]
        return [(x.dtype, element_shape(ctx.dims, [shape], node.label), "sequence")]

    def lower(self, node, k):
        x = k.input(0)
        axis = self._axis(node)
        split = node.input(1)
        return k.kernel("c/split_to_sequence.c.j2", allocates=True, x=x.data(), out=k.out.data(), axis=axis,
                        outer=_prod(x.data()["dims"][:axis]), inner=_prod(x.data()["dims"][axis + 1:]),
                        length=x.data()["dims"][axis], split=k.inputs[1].name if split is not None else None,
                        split_scalar=split is not None and split.rank == 0,
                        split_count=_count(node, split) if split is not None else None,
                        keepdims=bool(node.attrs.get("keepdims", 1)) or split is not None)


def _prod(dims) -> str:
    return " * ".join(f"(int64_t)({d})" for d in dims) or "1"


def _count(node, split) -> int:
    if split.rank == 0:
        return 1
    if not isinstance(split.shape[0], int):
        raise UnsupportedError(f"{node.label}: a split list whose length is known only at run time")
    return split.shape[0]
