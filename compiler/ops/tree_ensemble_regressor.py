from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from . import _tree_ensemble as te
from .registry import InferContext, OpDef, register


def _scoring(node: Node, ctx: InferContext) -> te.Scoring:
    targets = node.attrs.get("n_targets", 0)
    if targets is None or targets <= 0:
        raise ctx.fail("n_targets must be positive")
    aggregate = node.attrs.get("aggregate_function", "SUM")
    if aggregate not in te.AGGREGATES:
        raise ctx.fail(f"aggregate_function must be one of {', '.join(te.AGGREGATES)}, got {aggregate!r}")
    base = _ml.floats(node, "base_values", "base_values_as_tensor")
    return te.Scoring("regressor", targets, aggregate, _ml.transform(node, ctx),
                      [] if base is None else list(base))


@register("TreeEnsembleRegressor", since=1, domain=_ml.ML)
class TreeEnsembleRegressor(OpDef):
    """Y[n, t] = the aggregate (SUM, AVERAGE, MIN, MAX) of the leaf weights for target t that the row reaches
    in each tree, plus base_values, post-transformed."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx, matrix=True)
        scoring = _scoring(node, ctx)
        forest = te.v3_forest(node, classifier=False)
        te.check_features(ctx, forest, c)
        return [(dt.FLOAT, (n, scoring.targets))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        ctx = InferContext(node, None)
        return te.lower(node, k, te.v3_forest(node, classifier=False), _scoring(node, ctx))
