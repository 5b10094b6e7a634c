from __future__ import annotations

from dataclasses import dataclass

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import c_literal
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _ml, _svm
from .registry import InferContext, OpDef, register


@dataclass
class _Layout:
    labels: list
    classes: int
    vectors: int          # 0: linear models (one coefficient row per class)
    features: int
    proba: bool
    columns: int          # Z columns
    scores: int           # scores the post transform sees
    second: int           # onnxruntime's add_second_class for one score


def _layout(node: Node, ctx) -> _Layout:
    labels = _ml.int_labels(node, "classlabels_ints")
    classes = len(labels)
    if not classes:
        raise ctx.fail("classlabels_ints must list the classes")
    coef = node.attrs.get("coefficients", ())
    rho = node.attrs.get("rho", ())
    if not coef or not rho:
        raise ctx.fail("coefficients and rho are required")
    per_class = list(node.attrs.get("vectors_per_class", ()))
    vectors = sum(per_class)
    prob_a, prob_b = node.attrs.get("prob_a", ()), node.attrs.get("prob_b", ())
    if len(prob_a) != len(prob_b):
        raise ctx.fail("prob_a and prob_b differ in length")
    proba = bool(prob_a)
    pairs = classes * (classes - 1) // 2
    transform = _ml.transform(node, ctx)
    if vectors:
        if len(per_class) != classes or min(per_class) < 0:
            raise ctx.fail("vectors_per_class must give a non-negative count for each class")
        if classes < 2:
            raise ctx.fail("a support vector classifier needs two classes or more")
        sv = node.attrs.get("support_vectors", ())
        if not sv or len(sv) % vectors:
            raise ctx.fail(f"{len(sv)} support vector values do not split into {vectors} vectors")
        if len(coef) < (classes - 1) * vectors:
            raise ctx.fail(f"{len(coef)} coefficients, expected {(classes - 1) * vectors}")
        if len(rho) < pairs or (proba and len(prob_a) < pairs):
            raise ctx.fail(f"rho (and prob_a, prob_b) need {pairs} values")
        features = len(sv) // vectors
        if proba:
            return _Layout(labels, classes, vectors, features, True, classes, classes, -1)
        return _Layout(labels, classes, vectors, features, False, pairs if classes > 2 else 2, pairs,
                       (2 if transform == _ml.NONE else 0) if classes <= 2 else -1)
    if len(coef) % classes:
        raise ctx.fail(f"{len(coef)} coefficients do not split into {classes} classes")
    return _Layout(labels, classes, 0, len(coef) // classes, proba, classes, classes, -1)


@register("SVMClassifier", since=1, domain=_ml.ML)
class SVMClassifier(OpDef):
    """Y = the top class, Z = the class scores of a support vector (one-vs-one) or linear classifier,
    with Platt probabilities when prob_a / prob_b are given."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx)
        lay = _layout(node, ctx)
        _svm.kernel_data(node, ctx)
        if isinstance(c, int) and c != lay.features:
            raise ctx.fail(f"X has {c} features, the model {lay.features}")
        return [(_ml.label_type(node), (n,)), (dt.FLOAT, (n, lay.columns))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        ctx = InferContext(node, None)
        lay = _layout(node, ctx)
        x = k.input(0)
        c = x.dims[-1]
        per_class = list(node.attrs.get("vectors_per_class", ()))
        starts = [sum(per_class[:i]) for i in range(len(per_class))]
        coef = node.attrs["coefficients"]
        kernel_data = _svm.kernel_data(node, ctx) if lay.vectors else {"kernel": 0, "gamma": "0.0f", "coef0": "0.0f",
                                                                       "degree": "0.0f"}
        kernel = k.kernel(
            "c/svm.c.j2", helpers=(_ml.HELPER, _svm.HELPER), kind="classifier", svc=lay.vectors > 0,
            V=lay.vectors, F=lay.features, N=cexpr.lit(x.dims[0]) if x.rank == 2 else 1, C=cexpr.lit(c),
            check_features=c != lay.features,
            err_features=c_string("SVMClassifier: X has the wrong number of features"),
            x_load=x.load(f"n * {lay.features} + f"), coef=_svm.floats(coef), rho=_svm.floats(node.attrs["rho"]),
            sv=_svm.floats(node.attrs.get("support_vectors", ())), classes=lay.classes,
            labels=[c_literal(v, _ml.label_type(node)) for v in lay.labels], label_ctype=_ml.label_type(node).c_type, vstart=starts, vcount=per_class,
            proba=lay.proba and lay.vectors > 0, have_proba=lay.proba, prob_a=_svm.floats(node.attrs.get("prob_a", ())),
            prob_b=_svm.floats(node.attrs.get("prob_b", ())), all_positive=all(v >= 0 for v in coef),
            columns=lay.columns, scores=lay.scores, second=lay.second, transform=_ml.transform(node),
            Z=k.outputs[1].name, Y=k.outputs[0].name, **kernel_data)
        pairs = lay.classes * (lay.classes - 1) // 2
        kernel.scratch = {"x": 4 * lay.features, "s": 4 * max(lay.vectors, 1)}
        if lay.vectors:
            kernel.scratch["votes"] = 8 * lay.classes
            if lay.proba:
                kernel.scratch.update(pairs=4 * (lay.classes * lay.classes + pairs), q=4 * lay.classes * lay.classes,
                                      qp=4 * lay.classes)
        return kernel
