from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from . import _tree_ensemble as te
from .registry import InferContext, OpDef, register

TYPES = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16)


def _scoring(node: Node, ctx: InferContext) -> te.Scoring:
    targets = node.attrs.get("n_targets")
    if targets is None or targets <= 0:
        raise ctx.fail("n_targets must be positive")
    aggregate = node.attrs.get("aggregate_function", 1)
    if not 0 <= aggregate < len(te.AGGREGATES):
        raise ctx.fail(f"aggregate_function must be 0 to 3, got {aggregate}")
    transform = node.attrs.get("post_transform", 0)
    if transform not in te.V5_TRANSFORMS:
        raise ctx.fail(f"post_transform must be 0 to 4, got {transform}")
    return te.Scoring("regressor", targets, te.AGGREGATES[aggregate], te.V5_TRANSFORMS[transform])


@register("TreeEnsemble", since=5, domain=_ml.ML)
class TreeEnsemble(OpDef):
    """Y[n, t] = the aggregate of the leaf weights for target t that row n reaches in each tree, post-transformed
    (post_transform codes as the spec numbers them: 1 SOFTMAX, 2 LOGISTIC)."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx, TYPES, matrix=True)
        scoring = _scoring(node, ctx)
        forest = te.v5_forest(node)
        te.check_features(ctx, forest, c)
        return [(ctx.inp(0).dtype, (n, scoring.targets))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        ctx = InferContext(node, None)
        return te.lower(node, k, te.v5_forest(node), _scoring(node, ctx))
