from ._indexing import permuted_strides, strided_copy
from .registry import OpDef, register


@register("SpaceToDepth", since=1)
class SpaceToDepth(OpDef):
    """Y[n, depth index of (c, i, j), h, w] = X[n, c, h*b + i, w*b + j]; DCR (default) or CRD depth order."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        b = node.attrs["blocksize"]
        if len(x.shape) != 4:
            raise ctx.fail(f"input must be 4-D, got {x.shape}")
        if b < 1 or node.attrs.get("mode", "DCR") not in ("DCR", "CRD"):
            raise ctx.fail("blocksize must be positive and mode DCR or CRD")
        n, c, h, w = x.shape
        for d in (h, w):
            if isinstance(d, int) and d % b:
                raise ctx.fail(f"spatial dim {d} is not a multiple of blocksize {b}")
        return [(x.dtype, (n, ctx.dims.mul(c, b * b), ctx.dims.floordiv(h, b), ctx.dims.floordiv(w, b)))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        b = node.attrs["blocksize"]
        n, c, _, _ = x.dims
        h, w = y.dims[2], y.dims[3]
        # X viewed as (n, c, h, i, w, j), then walked in the output's order.
        view = [n, c, h, b, w, b]
        perm = [0, 3, 5, 1, 2, 4] if node.attrs.get("mode", "DCR") == "DCR" else [0, 1, 3, 5, 2, 4]
        return strided_copy(k, x, [view[p] for p in perm], permuted_strides(view, perm))
