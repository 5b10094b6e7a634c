from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from . import _tree_ensemble as te
from .registry import InferContext, OpDef, register


def _scoring(node: Node, ctx: InferContext) -> te.Scoring:
    labels = _ml.int_labels(node, "classlabels_int64s")
    classes = len(labels)
    if not classes:
        raise ctx.fail("classlabels_int64s must list the classes")
    base = _ml.floats(node, "base_values", "base_values_as_tensor")
    base = [] if base is None else list(base)
    allowed = (0, 1) if classes == 1 else (0, 1, 2) if classes == 2 else (0, classes)
    if len(base) not in allowed:
        raise ctx.fail(f"base_values should have {', '.join(map(str, allowed))} values for {classes} classes, "
                       f"got {len(base)}")
    weights = _ml.floats(node, "class_weights", "class_weights_as_tensor")
    ids = set(node.attrs.get("class_ids", ()))
    return te.Scoring("classifier", classes, "SUM", _ml.transform(node, ctx), base, labels,
                      binary_case=classes == 2 and len(ids) == 1,
                      all_positive=weights is None or bool((weights >= 0).all()))


@register("TreeEnsembleClassifier", since=1, domain=_ml.ML)
class TreeEnsembleClassifier(OpDef):
    """Y = the top class, Z = the class scores: sums of the leaf weights each tree gives the row, plus
    base_values, post-transformed (with onnxruntime's rules for two classes)."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx, matrix=True)
        scoring = _scoring(node, ctx)
        forest = te.v3_forest(node, classifier=True)
        te.check_features(ctx, forest, c)
        return [(_ml.label_type(node), (n,)), (dt.FLOAT, (n, scoring.targets))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        ctx = InferContext(node, None)
        return te.lower(node, k, te.v3_forest(node, classifier=True), _scoring(node, ctx))
