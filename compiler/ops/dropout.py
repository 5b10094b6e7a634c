import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._elementwise import check_dtype
from .registry import OpDef, register


@register("Dropout", since=1, until=11)
class Dropout(OpDef):
    """output = data (inference); the optional mask is all true."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        if node.version < 7 and not node.attrs.get("is_test", 0) and node.attrs.get("ratio", 0.5) != 0:
            raise UnsupportedError(f"{node.label}: training mode (is_test=0) is not supported")
        self.check_training(node, ctx)
        mask = dt.BOOL if node.version >= 10 else x.dtype
        return [(x.dtype, x.shape), (mask, x.shape)][:len(node.outputs)]

    def check_training(self, node, ctx) -> None:
        pass

    def training_check(self, k: KernelContext) -> str:
        """C condition under which the node would have to train; "" if never."""
        return ""

    def lower(self, node, k):
        x, y = k.input(0), k.out
        mask = k.outputs[1] if len(k.outputs) > 1 else None
        return k.kernel("c/dropout.c.j2", data=x.name, output=y.name, ctype=y.ctype, count=cexpr.lit(y.numel),
                        mask=mask.name if mask else "", one=mask.store("1") if mask else "",
                        training_check=self.training_check(k))


@register("Dropout", since=12)
class DropoutTrainingInput(Dropout):
    """output = data (inference, or training with ratio 0); the optional mask is all true."""

    def check_training(self, node, ctx) -> None:
        training, ratio = ctx.const(2), ctx.const(1)
        ratio_nonzero = not ctx.has(1) or (ratio is not None and bool(np.any(ratio != 0)))
        if training is not None and bool(np.any(training)) and ratio_nonzero:
            raise UnsupportedError(f"{node.label}: training mode with a nonzero ratio is not supported")

    def training_check(self, k):
        if not k.has_input(2):
            return ""
        training = k.input(2)
        if training.value is not None and not np.any(training.value):
            return ""
        ratio_nonzero = "1"  # the default ratio is 0.5
        if k.has_input(1):
            ratio = k.input(1)
            if ratio.value is None:
                ratio_nonzero = f"{ratio.load('0')} != 0"
            elif not np.any(ratio.value != 0):
                return ""
        if training.value is not None:
            return ratio_nonzero
        return f"{training.name}[0] && {ratio_nonzero}"
