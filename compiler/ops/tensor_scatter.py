from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("TensorScatter", since=24)
class TensorScatter(OpDef):
    """present_cache = past_cache with update written along axis at each batch's write index (linear or circular)."""

    def _axis(self, node: Node, ctx: InferContext, rank: int) -> int:
        axis = int(node.attrs.get("axis", -2))
        if not -rank <= axis < rank or axis % rank == 0:
            raise ctx.fail(f"axis {axis} is out of range or names the batch dim (rank {rank})")
        return axis % rank

    def infer(self, node, ctx):
        past, update = ctx.inp(0), ctx.inp(1)
        if node.attrs.get("mode", "linear") not in ("linear", "circular"):
            raise ctx.fail(f"unknown mode {node.attrs['mode']!r}")
        if update.dtype != past.dtype or len(update.shape) != len(past.shape):
            raise ctx.fail(f"update must have past_cache's type and rank, got {update.dtype} {update.shape}")
        axis = self._axis(node, ctx, len(past.shape))
        for i, (a, b) in enumerate(zip(past.shape, update.shape)):
            if isinstance(a, int) and isinstance(b, int) and (a < b if i == axis else a != b):
                raise ctx.fail(f"update shape {update.shape} does not fit past_cache shape {past.shape}")
        if ctx.has(2):
            w = ctx.inp(2)
            if w.dtype != dt.INT64 or len(w.shape) != 1:
                raise ctx.fail("write_indices must be a 1-D int64 tensor")
            if isinstance(w.shape[0], int) and isinstance(past.shape[0], int) and w.shape[0] != past.shape[0]:
                raise ctx.fail(f"write_indices has {w.shape[0]} values for a batch of {past.shape[0]}")
        return [(past.dtype, past.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        past, update, out = k.input(0), k.input(1), k.out
        axis = self._axis(node, InferContext(node, None), past.rank)
        checks = [{"cond": f"{cexpr.lit(u)} != {cexpr.lit(p)}",
                   "msg": c_string(f"TensorScatter: update dim {i} differs from past_cache")}
                  for i, (p, u) in enumerate(zip(past.dims, update.dims)) if i != axis and p != u]
        if isinstance(update.dims[axis], str) or isinstance(past.dims[axis], str):
            checks.append({"cond": f"{cexpr.lit(update.dims[axis])} > {cexpr.lit(past.dims[axis])}",
                           "msg": c_string("TensorScatter: update is longer than the cache")})
        indices = k.input(2) if k.has_input(2) else None
        if indices is not None and indices.dims[0] != past.dims[0]:
            checks.append({"cond": f"{cexpr.lit(indices.dims[0])} != {cexpr.lit(past.dims[0])}",
                           "msg": c_string("TensorScatter: write_indices length differs from the batch size")})
        return k.kernel(
            "c/tensor_scatter.c.j2", checks=checks, past=past.name, update=update.name, present=out.name,
            indices=indices.name if indices is not None else None, ctype=out.ctype,
            circular=node.attrs.get("mode", "linear") == "circular", numel=cexpr.lit(out.numel),
            B=cexpr.lit(past.dims[0]), R=cexpr.lit(cexpr.prod(past.dims[1:axis])),
            M=cexpr.lit(past.dims[axis]), may_be_empty=not (isinstance(past.dims[axis], int) and past.dims[axis] > 0), S=cexpr.lit(update.dims[axis]),
            inner=cexpr.lit(cexpr.prod(past.dims[axis + 1:])))
