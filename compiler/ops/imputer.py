from __future__ import annotations

import math

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import c_literal
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from .registry import InferContext, OpDef, register
from .scaler import _stride


@register("Imputer", since=1, domain=_ml.ML)
class Imputer(OpDef):
    """Y = X with the elements equal to the replaced value (NaN matches NaN) set to the imputed value."""
    foldable = False

    def _values(self, node: Node, ctx: InferContext, x: dt.DType):
        floats, ints = node.attrs.get("imputed_value_floats", ()), node.attrs.get("imputed_value_int64s", ())
        if bool(floats) == bool(ints):
            raise ctx.fail("exactly one of imputed_value_floats and imputed_value_int64s must be given")
        if x.is_float:
            if not floats:
                raise ctx.fail(f"X is {x}: imputed_value_floats must be given")
            return list(floats), float(node.attrs.get("replaced_value_float", 0.0))
        if not ints:
            raise ctx.fail(f"X is {x}: imputed_value_int64s must be given")
        return list(ints), int(node.attrs.get("replaced_value_int64", 0))

    def infer(self, node, ctx):
        x = _ml.feature_tensor(ctx)
        self._values(node, ctx, x.dtype)
        return [(x.dtype, x.shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x = k.input(0)
        values, replaced = self._values(node, InferContext(node, None), x.dtype)
        stride = _stride(x.dims)
        if isinstance(stride, int):
            per_feature = "yes" if stride == len(values) else "no"
        else:
            per_feature = "runtime"
        nan = x.dtype.is_float and math.isnan(replaced)
        return k.kernel("c/imputer.c.j2", X=x.name, Y=k.out.name, ctype=x.ctype, total=cexpr.lit(x.numel),
                        stride=cexpr.lit(stride), per_feature=per_feature, nan=nan,
                        imputed=[c_literal(v, x.dtype) for v in np.array(values).astype(x.dtype.np)],
                        replaced=None if nan else c_literal(replaced, x.dtype if x.dtype.is_float else dt.INT64))
