from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from .. import dtypes as dt
from ..ir import Node
from . import _ml, _svm
from .registry import InferContext, OpDef, register


def _layout(node: Node, ctx) -> tuple[int, int]:
    """(support vectors, features); no support vectors means a linear model over the coefficients."""
    vectors = node.attrs.get("n_supports", 0)
    coef = node.attrs.get("coefficients", ())
    if not coef:
        raise ctx.fail("coefficients are required")
    if not node.attrs.get("rho"):
        raise ctx.fail("rho is required")
    if vectors < 0:
        raise ctx.fail("n_supports must not be negative")
    if vectors == 0:
        return 0, len(coef)
    sv = node.attrs.get("support_vectors", ())
    if len(sv) % vectors or not sv:
        raise ctx.fail(f"{len(sv)} support vector values do not split into {vectors} vectors")
    if len(coef) < vectors:
        raise ctx.fail(f"{len(coef)} coefficients for {vectors} support vectors")
    return vectors, len(sv) // vectors


@register("SVMRegressor", since=1, domain=_ml.ML)
class SVMRegressor(OpDef):
    """Y[n, 0] = sum_v coefficients[v] K(X[n], support_vectors[v]) + rho (or a linear model when there are no
    support vectors); one_class maps it to +1 / -1."""
    foldable = False

    def infer(self, node, ctx):
        n, c = _ml.check_input(ctx)
        _, features = _layout(node, ctx)
        _svm.kernel_data(node, ctx)
        if isinstance(c, int) and c != features:
            raise ctx.fail(f"X has {c} features, the model {features}")
        return [(dt.FLOAT, (n, 1))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        ctx = InferContext(node, None)
        vectors, features = _layout(node, ctx)
        x = k.input(0)
        c = x.dims[-1]
        kernel = k.kernel(
            "c/svm.c.j2", helpers=(_ml.HELPER, _svm.HELPER), kind="regressor", svc=vectors > 0, V=vectors,
            F=features, N=cexpr.lit(x.dims[0]) if x.rank == 2 else 1, C=cexpr.lit(c),
            check_features=c != features, err_features=c_string("SVMRegressor: X has the wrong number of features"),
            x_load=x.load(f"n * {features} + f"), coef=_svm.floats(node.attrs["coefficients"]),
            rho=_svm.floats(node.attrs["rho"]), sv=_svm.floats(node.attrs.get("support_vectors", ())),
            one_class=bool(node.attrs.get("one_class", 0)), Y=k.out.name, **_svm.kernel_data(node, ctx))
        kernel.scratch = {"x": 4 * features, "s": 4 * max(vectors, 1)}
        return kernel
