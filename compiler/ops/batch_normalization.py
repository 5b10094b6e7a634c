from ...codegen import cexpr
from ...codegen.cexpr import math_fn
from ...codegen.literals import float_literal
from ..errors import UnsupportedError
from ._normalization import check_float_input, check_vector, length_checks
from .registry import OpDef, register


class BatchNormalizationBase(OpDef):
    """Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel (axis 1)."""

    def training(self, node) -> bool:
        return False

    def saved_statistics(self, node) -> int:
        """How many of the batch mean and variance outputs follow the running statistics."""
        return 0

    def per_element(self, node) -> bool:
        """spatial=0 (before opset 9): parameters have one value per element of a sample."""
        return node.attrs.get("spatial", 1) == 0

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_float_input(ctx, 0, "X")
        if len(x.shape) < 2:
            raise ctx.fail("X must have rank >= 2 (N x C x ...)")
        for i, what in enumerate(("scale", "B", "mean", "var"), start=1):
            check_float_input(ctx, i, what)
            if self.per_element(node):
                if ctx.inp(i).shape != x.shape[1:]:
                    raise ctx.fail(f"{what} must have shape {list(x.shape[1:])} (spatial=0)")
            else:
                check_vector(ctx, i, x.shape[1], what)
        results = [(x.dtype, x.shape)]
        if self.training(node):
            results += [(ctx.inp(3).dtype, ctx.inp(3).shape), (ctx.inp(4).dtype, ctx.inp(4).shape)]
            results += results[1:][:self.saved_statistics(node)]
        elif len(node.outputs) > 1:
            raise ctx.fail("the running statistics outputs exist only in training mode")
        return results

    def lower(self, node, k):
        x, y = k.input(0), k.out
        scale, bias, mean, var = (k.input(i) for i in range(1, 5))
        c = "double" if "double" in (x.compute, y.compute) else "float"
        C, S = x.dims[1], cexpr.prod(x.dims[2:])
        per_element = self.per_element(node)
        param = "c * " + cexpr.lit(S) + " + q" if per_element else "c"
        checks = [] if per_element else length_checks(k, [(t, C) for t in (scale, bias, mean, var)])
        running = [{"name": out.name, "input": inp.load("c"), "batch": stat, "store": out.store("{}")}
                   for out, inp, stat in zip(k.outputs[1:], (mean, var), ("mu", "variance"))]
        saved = [{"name": out.name, "store": out.store(stat)} for out, stat in zip(k.outputs[3:], ("mu", "variance"))]
        return k.kernel("c/batch_norm.c.j2", X=x.name, Y=y.name, compute=c, load=x.load("{}"),
                        store=y.store("{}"), N=cexpr.lit(x.dims[0]), C=cexpr.lit(C), S=cexpr.lit(S),
                        count=cexpr.lit(cexpr.mul(x.dims[0], S)), per_element=per_element,
                        training=self.training(node), checks=checks,
                        scale=scale.load(param), bias=bias.load(param), mean=mean.load(param), var=var.load(param),
                        epsilon=float_literal(node.attrs.get("epsilon", 1e-5), c),
                        momentum=float_literal(node.attrs.get("momentum", 0.9), c), running=running, saved=saved,
                        sqrt=math_fn("sqrt", c))


@register("BatchNormalization", since=1, until=6)
class BatchNormalization1(BatchNormalizationBase):
    """BatchNormalization-1 and -6: is_test=1 normalizes with the given mean and var (per
    element with spatial=0); is_test=0 normalizes with the batch statistics and may output
    the running mean and var (momentum-weighted) and the batch mean and (biased) variance
    as saved_mean and saved_var, as onnx's reference implementation does. consumed_inputs
    (opset 1) is a legacy in-place hint that does not change the results."""

    def training(self, node) -> bool:
        return not node.attrs.get("is_test", 0)

    def saved_statistics(self, node) -> int:
        return max(0, len(node.outputs) - 3)

    def infer(self, node, ctx):
        if self.training(node) and self.per_element(node):
            raise UnsupportedError(f"{node.label}: training mode (is_test=0) with spatial=0 is not supported")
        results = super().infer(node, ctx)
        return results[:len(node.outputs)]


@register("BatchNormalization", since=7, until=13)
class BatchNormalization7(BatchNormalizationBase):
    """BatchNormalization before opset 14: inference only (spatial=0 before opset 9)."""


@register("BatchNormalization", since=14)
class BatchNormalization(BatchNormalizationBase):
    """BatchNormalization-14+: training_mode=1 normalizes with the batch statistics and
    outputs running_mean/running_var."""

    def training(self, node) -> bool:
        return bool(node.attrs.get("training_mode", 0))
