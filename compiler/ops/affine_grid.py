from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("AffineGrid", since=20)
class AffineGrid(OpDef):
    """grid[n, ..., :] = theta[n] @ (x, y[, z], 1) over a regular grid of normalized positions."""

    def _rank(self, ctx: InferContext) -> int:
        theta, size = ctx.inp(0), ctx.inp(1)
        if theta.dtype not in dt.FLOATS:
            raise ctx.fail(f"theta type {theta.dtype} is not a float type")
        if size.dtype != dt.INT64 or len(size.shape) != 1 or size.shape[0] not in (4, 5):
            raise ctx.fail(f"size must be a 1-D int64 tensor of 4 or 5 entries, got {size.dtype}{list(size.shape)}")
        r = size.shape[0] - 2
        if len(theta.shape) != 3 or theta.shape[1:] != (r, r + 1):
            raise ctx.fail(f"theta must have shape (N, {r}, {r + 1}), got {theta.shape}")
        return r

    def infer(self, node, ctx):
        r = self._rank(ctx)
        theta, size = ctx.inp(0), ctx.const(1)
        if size is not None:
            if (size < 0).any():
                raise ctx.fail(f"size must not be negative, got {size.tolist()}")
            if isinstance(theta.shape[0], int) and int(size[0]) != theta.shape[0]:
                raise ctx.fail(f"size[0] = {int(size[0])} differs from the batch of theta ({theta.shape[0]})")
            spatial = tuple(int(s) for s in size[2:])
        else:
            spatial = tuple(ctx.dims.data(node.name or "AffineGrid") for _ in range(r))
        return [(theta.dtype, (theta.shape[0],) + spatial + (r,))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        theta, size, grid = k.input(0), k.input(1), k.out
        r = theta.dims[1]
        batch = None  # a symbolic batch checked against a constant size[0]
        if size.value is not None and isinstance(theta.dims[0], str):
            batch = {"dim": theta.dims[0], "size": int(size.value[0])}
        axes = [{"var": v, "size": cexpr.lit(d)} for v, d in zip("dhw"[3 - r:], grid.dims[1:-1])]
        kernel = k.kernel("c/affine_grid.c.j2", N=cexpr.lit(theta.dims[0]), R=r, axes=axes, theta=theta.name,
                          load=theta.dtype.load, grid=grid.name, store=grid.dtype.store,
                          align=bool(node.attrs.get("align_corners", 0)), batch=batch)
        if k.data_dims:
            kernel.shape_template = "c/affine_grid_shape.c.j2"
            kernel.shape_data = {"size": size.name, "R": r, "N": cexpr.lit(theta.dims[0])}
        return kernel
