from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from .linear_classifier import check_features, linear_kernel
from .registry import OpDef, register


@register("LinearRegressor", since=1, domain=_ml.ML)
class LinearRegressor(OpDef):
    """Y[n, t] = coefficients[t] . X[n] + intercepts[t], post-transformed when there are several targets."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx)
        targets = node.attrs.get("targets", 1)
        check_features(ctx, c, len(node.attrs.get("coefficients", ())), targets)
        _ml.transform(node, ctx)
        return [(dt.FLOAT, (n, targets))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        targets = node.attrs.get("targets", 1)
        intercepts = list(node.attrs.get("intercepts", ()))
        return linear_kernel(node, k, mode="regressor", coef=list(node.attrs["coefficients"]),
                             bias=intercepts if len(intercepts) == targets else [], targets=targets,
                             acc="double" if k.input(0).dtype is dt.DOUBLE else "float")
