from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}
_PADDINGS = ("zeros", "border", "reflection")


@register("GridSample", since=16)
class GridSample(OpDef):
    """Y[n, c, o...] = X[n, c] sampled at the normalized grid[n, o...] positions."""

    def _mode(self, node: Node, ctx: InferContext) -> str:
        x, grid = ctx.inp(0), ctx.inp(1)
        names = ("bilinear", "bicubic", "nearest") if node.version < 20 else ("linear", "cubic", "nearest")
        mode = node.attrs.get("mode", names[0])
        if mode not in names:
            raise ctx.fail(f"mode {mode!r} is not one of {', '.join(names)}")
        mode = _MODES[mode]
        if node.attrs.get("padding_mode", "zeros") not in _PADDINGS:
            raise ctx.fail(f"padding_mode {node.attrs['padding_mode']!r} is not one of {', '.join(_PADDINGS)}")
        if grid.dtype not in dt.FLOATS:
            raise ctx.fail(f"grid type {grid.dtype} is not a float type")
        allowed = dt.FLOATS if mode != "nearest" else dt.NUMERIC + (dt.BOOL,)
        if x.dtype not in allowed:
            raise ctx.fail(f"{mode} sampling of {x.dtype} is not supported")
        rank = len(x.shape)
        if rank < 3 or (node.version < 20 and rank != 4):
            raise ctx.fail(f"X must be {'4-D' if node.version < 20 else 'at least 3-D'}, got shape {x.shape}")
        if len(grid.shape) != rank or grid.shape[-1] != rank - 2:
            raise ctx.fail(f"grid shape {grid.shape} does not match X shape {x.shape}")
        return mode

    def infer(self, node, ctx):
        self._mode(node, ctx)
        x, grid = ctx.inp(0), ctx.inp(1)
        return [(x.dtype, (ctx.dims.same(x.shape[0], grid.shape[0]), x.shape[1]) + tuple(grid.shape[1:-1]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        mode = self._mode(node, InferContext(node, None))
        x, grid, y = k.input(0), k.input(1), k.out
        spatial = x.dims[2:]
        compute = "double" if dt.DOUBLE in (x.dtype, grid.dtype) else "float"
        sizes = [cexpr.lit(d) for d in spatial]
        t = (lambda i: "0") if mode == "nearest" else (lambda i: f"t{i}")
        tap = {"inside": " && ".join(f"offset[{i}][{t(i)}] >= 0" for i in range(len(spatial))),
               "offset": " + ".join(f"offset[{i}][{t(i)}]" for i in range(len(spatial))),
               "weight": " * ".join(f"weight[{i}][{t(i)}]" for i in range(len(spatial)))}
        strides = [cexpr.lit(s) for s in cexpr.strides(spatial)]
        padding = node.attrs.get("padding_mode", "zeros")
        return k.kernel(
            "c/grid_sample.c.j2", helpers=("c/helpers/grid_sample.c.j2",) if padding == "reflection" else (),
            mode=mode, padding=padding,
            align=bool(node.attrs.get("align_corners", 0)), N=cexpr.lit(x.dims[0]), C=cexpr.lit(x.dims[1]),
            S=cexpr.lit(cexpr.prod(spatial)), P=cexpr.lit(cexpr.prod(y.dims[2:])), R=len(spatial),
            axes=[{"size": s, "stride": st} for s, st in zip(sizes, strides)],
            tap=tap, taps={"nearest": 1, "linear": 2, "cubic": 4}[mode], X=x.name, grid=grid.name, Y=y.name,
            ctype=x.ctype, load=x.dtype.load, store=y.dtype.store, gload=grid.dtype.load, ct=compute,
            fn="" if compute == "double" else "f",
            check=f"{cexpr.lit(grid.dims[0])} != {cexpr.lit(x.dims[0])}" if grid.dims[0] != x.dims[0] else None)
