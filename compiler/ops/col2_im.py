import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef, register


@register("Col2Im", since=18)
class Col2Im(OpDef):
    """image[n, c] = sum of the column blocks of input[n] placed back at their sliding-window positions."""

    def _spatial(self, node: Node, ctx: InferContext) -> int:
        x, image, block = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        if x.dtype not in dt.NUMERIC:
            raise ctx.fail(f"input type {x.dtype} is not supported")
        if len(x.shape) != 3:
            raise ctx.fail(f"input must be 3-D (N, C * prod(block_shape), L), got {x.shape}")
        for name, v in (("image_shape", image), ("block_shape", block)):
            if v.dtype != dt.INT64 or len(v.shape) != 1 or not isinstance(v.shape[0], int):
                raise ctx.fail(f"{name} must be a 1-D int64 tensor of static length")
        r = image.shape[0]
        if block.shape[0] != r or r < 1:
            raise ctx.fail("image_shape and block_shape must have the same (non-zero) length")
        for name, count, low in (("dilations", r, 1), ("strides", r, 1), ("pads", 2 * r, 0)):
            values = node.attrs.get(name)
            if values is not None and (len(values) != count or min(values) < low):
                raise ctx.fail(f"{name} must have {count} values of at least {low}, got {list(values)}")
        return r

    def infer(self, node, ctx):
        r = self._spatial(node, ctx)
        x, image, block = ctx.inp(0), ctx.const(1), ctx.const(2)
        if image is not None:
            if (image < 0).any():
                raise ctx.fail(f"image_shape must not be negative, got {image.tolist()}")
            spatial = tuple(int(d) for d in image)
        else:
            spatial = tuple(ctx.dims.data(node.name or "Col2Im") for _ in range(r))
        if block is not None:
            size = int(np.prod(block))
            if (block <= 0).any():
                raise ctx.fail(f"block_shape must be positive, got {block.tolist()}")
            if isinstance(x.shape[1], int) and x.shape[1] % size:
                raise ctx.fail(f"input dim 1 ({x.shape[1]}) is not a multiple of the block size {size}")
            channels = ctx.dims.floordiv(x.shape[1], size)
        else:
            channels = ctx.dims.data(node.name or "Col2Im")
        return [(x.dtype, (x.shape[0], channels) + spatial)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        r = self._spatial(node, InferContext(node, None))
        x, y = k.input(0), k.out
        image, block = k.input(1), k.input(2)
        blocks = [int(v) for v in block.value] if block.value is not None else [block.name + f"[{i}]" for i in range(r)]
        attrs = node.attrs
        dilations = list(attrs.get("dilations", [1] * r))
        strides = list(attrs.get("strides", [1] * r))
        pads = list(attrs.get("pads", [0] * (2 * r)))
        axes = []
        for i in range(r):
            size, b = cexpr.lit(y.dims[2 + i]), cexpr.lit(blocks[i])
            span = f"{dilations[i]} * ({b} - 1)" if dilations[i] != 1 else f"({b} - 1)"
            padded = f"{size} + {pads[i] + pads[r + i]}" if pads[i] + pads[r + i] else size
            windows = f"({padded} - {span} - 1) / {strides[i]} + 1" if strides[i] != 1 else f"{padded} - {span}"
            at = " + ".join(t for t in (f"w{i} * {strides[i]}" if strides[i] != 1 else f"w{i}",
                                        f"k{i} * {dilations[i]}" if dilations[i] != 1 else f"k{i}") if t)
            axes.append({"size": size, "block": b, "windows": windows,
                         "position": f"{at} - {pads[i]}" if pads[i] else at})
        kernel = k.kernel("c/col2im.c.j2", N=cexpr.lit(x.dims[0]), C=cexpr.lit(y.dims[1]),
                          rows=cexpr.lit(x.dims[1]), L=cexpr.lit(x.dims[2]), axes=axes,
                          K=cexpr.lit(cexpr.prod(blocks)), X=x.name, Y=y.name, ctype=y.ctype,
                          add=y.dtype.store.format(f"{y.dtype.load.format('{y}')} + {x.dtype.load.format('{x}')}"),
                          checks=[f"{b} <= 0" for b in blocks if isinstance(b, str)])
        if k.data_dims:
            where = {f"out_{y.dims[a]}": a for a in range(1, y.rank) if isinstance(y.dims[a], str)}
            dims = []
            for var in k.data_dims:
                a = where[var]
                dims.append({"var": var, "channels": a == 1,
                             "value": image.name + f"[{a - 2}]" if a >= 2 else None})
            kernel.shape_template = "c/col2im_shape.c.j2"
            kernel.shape_data = {"dims": dims, "rows": cexpr.lit(x.dims[1]), "K": cexpr.lit(cexpr.prod(blocks)),
                                 "blocks": [b for b in blocks if isinstance(b, str)]}
        return kernel
