from ._indexing import permuted_strides, strided_copy
from .registry import OpDef, register


@register("DepthToSpace", since=1)
class DepthToSpace(OpDef):
    """Y[n, c, h*b + i, w*b + j] = X[n, depth index of (c, i, j), h, w]; DCR or CRD depth order."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        b = node.attrs["blocksize"]
        if len(x.shape) != 4:
            raise ctx.fail(f"input must be 4-D, got {x.shape}")
        if b < 1 or node.attrs.get("mode", "DCR") not in ("DCR", "CRD"):
            raise ctx.fail("blocksize must be positive and mode DCR or CRD")
        n, c, h, w = x.shape
        if isinstance(c, int) and c % (b * b):
            raise ctx.fail(f"channels {c} are not a multiple of blocksize^2 = {b * b}")
        return [(x.dtype, (n, ctx.dims.floordiv(c, b * b), ctx.dims.mul(h, b), ctx.dims.mul(w, b)))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        b = node.attrs["blocksize"]
        n, c, h, w = x.dims
        c_out = y.dims[1]
        # X viewed as 6-D, then walked in the output's order (n, c, h, i, w, j).
        if node.attrs.get("mode", "DCR") == "DCR":
            view, perm = [n, b, b, c_out, h, w], [0, 3, 4, 1, 5, 2]
        else:
            view, perm = [n, c_out, b, b, h, w], [0, 1, 4, 2, 5, 3]
        return strided_copy(k, x, [view[p] for p in perm], permuted_strides(view, perm))
