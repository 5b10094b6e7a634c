from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import float_literal
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from .registry import OpDef, register


def _stride(dims):
    """The feature count onnxruntime's ml kernels use: dim 1 of X, or dim 0 when X is 1-D."""
    return dims[0] if len(dims) == 1 else dims[1]


@register("Scaler", since=1, domain=_ml.ML)
class Scaler(OpDef):
    """Y = (X - offset) * scale per feature (or with one offset and scale for all), as float."""
    foldable = False

    def infer(self, node, ctx):
        x = _ml.feature_tensor(ctx)
        scale, offset = node.attrs.get("scale", ()), node.attrs.get("offset", ())
        if not scale or len(scale) != len(offset):
            raise ctx.fail(f"scale ({len(scale)} values) and offset ({len(offset)}) must be non-empty and match")
        stride = _stride(x.shape)
        if len(scale) != 1 and isinstance(stride, int) and stride != len(scale):
            raise ctx.fail(f"scale and offset have {len(scale)} values, X has {stride} features")
        return [(dt.FLOAT, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        scale, offset = node.attrs["scale"], node.attrs["offset"]
        stride = _stride(x.dims)
        return k.kernel("c/scaler.c.j2", X=x.name, Y=k.out.name, count=len(scale),
                        scale=[float_literal(v, "float") for v in scale],
                        offset=[float_literal(v, "float") for v in offset],
                        total=cexpr.lit(x.numel), stride=cexpr.lit(stride),
                        check=len(scale) != 1 and not isinstance(stride, int),
                        err=c_string("Scaler: scale and offset do not match the feature count of X"))
