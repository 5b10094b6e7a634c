from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import c_literal, float_literal
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _ml
from .registry import InferContext, OpDef, register


def linear_kernel(node: Node, k: KernelContext, *, mode: str, coef, bias, targets: int, labels=(),
                  acc: str = "float") -> Kernel:
    """The c/linear_model.c.j2 kernel: rows of X times the coefficient rows, plus intercepts."""
    x = k.input(0)
    features = len(coef) // targets
    c = x.dims[-1]
    outs = k.outputs
    kernel = k.kernel(
        "c/linear_model.c.j2", helpers=(_ml.HELPER,), mode=mode, acc=acc, targets=targets,
        coef=[float_literal(v, acc) for v in coef], bias=[float_literal(v, acc) for v in bias],
        labels=[c_literal(v, _ml.label_type(node)) for v in labels], label_ctype=_ml.label_type(node).c_type,
        transform=_ml.transform(node), N=cexpr.lit(x.dims[0]) if x.rank == 2 else 1, C=cexpr.lit(c), F=features,
        check_features=c != features, err_features=c_string(f"{node.op_type}: X has the wrong number of features "
                                                            f"(the coefficients have {features})"),
        x_load=x.load(f"n * {features} + k"), Y=outs[0].name, Z=outs[1].name if len(outs) > 1 else None)
    kernel.scratch = {"scores": 4 * targets}
    return kernel


def check_features(ctx: InferContext, features, coef_count: int, targets: int) -> None:
    """The coefficients form ``targets`` rows of X's feature count."""
    if targets <= 0 or coef_count == 0 or coef_count % targets:
        raise ctx.fail(f"{coef_count} coefficients do not split into {targets} rows")
    if isinstance(features, int) and features != coef_count // targets:
        raise ctx.fail(f"X has {features} features, the coefficients {coef_count // targets}")


@register("LinearClassifier", since=1, domain=_ml.ML)
class LinearClassifier(OpDef):
    """Y = top class, Z = class scores (coefficients x + intercepts, post-transformed) for each row of X."""
    foldable = False  # onnxruntime's binary-score rules, not the reference evaluator's

    def _setup(self, node: Node, ctx: InferContext):
        labels = _ml.int_labels(node, "classlabels_ints")
        intercepts = list(node.attrs.get("intercepts", ()))
        coef = list(node.attrs.get("coefficients", ()))
        targets = len(intercepts)
        if not targets:
            raise ctx.fail("intercepts must give one value per class")
        if targets == 1:
            if labels and len(labels) != 2:
                raise ctx.fail(f"one score needs two class labels or none, got {len(labels)}")
            mode = "binary" if labels else "single"
        else:
            if len(labels) != targets:
                raise ctx.fail(f"{targets} intercepts but {len(labels)} class labels")
            mode = "classifier"
        _ml.transform(node, ctx)
        return labels, intercepts, coef, targets, mode

    def infer(self, node, ctx):
        _, _, coef, targets, mode = self._setup(node, ctx)
        n, c = _ml.check_input(ctx)
        check_features(ctx, c, len(coef), targets)
        return [(_ml.label_type(node), (n,)), (dt.FLOAT, (n, 2 if mode == "binary" else targets))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        labels, intercepts, coef, targets, mode = self._setup(node, InferContext(node, None))
        return linear_kernel(node, k, mode=mode, coef=coef, bias=intercepts, targets=targets, labels=labels)
