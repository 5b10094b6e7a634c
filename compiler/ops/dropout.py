import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import KernelContext
from .. import dtypes as dt
from ._elementwise import check_dtype
from ._random import HELPER, seed_data
from .registry import OpDef, register


@register("Dropout", since=1, until=11)
class Dropout1(OpDef):
    """Inference: output = data, the optional mask all true. Training (versions 1 to 6 with
    is_test=0; from 12 the training_mode input): each element is kept with probability
    1 - ratio, scaled by 1 / (1 - ratio), the mask telling which were kept."""
    foldable = False   # a training node draws on every run

    def infer(self, node, ctx):
        x = ctx.inp(0)
        check_dtype(ctx, x.dtype, dt.FLOATS)
        mask = dt.BOOL if node.version >= 10 else x.dtype
        return [(x.dtype, x.shape), (mask, x.shape)][:len(node.outputs)]

    def training_check(self, k: KernelContext) -> str:
        """C condition under which the node trains with a nonzero ratio; "" if never."""
        node = k.node
        if node.version >= 7 or node.attrs["is_test"] or node.attrs["ratio"] == 0:
            return ""
        return "1"

    def ratio(self, k: KernelContext) -> str:
        return f"(double)({float(k.node.attrs['ratio']).hex()})"

    def lower(self, node, k):
        x, y = k.input(0), k.out
        mask = k.outputs[1] if len(k.outputs) > 1 else None
        training_check = self.training_check(k)
        stream = k.random_stream() if training_check else None
        draws = seed_data(node, stream) if stream is not None else {}
        return k.kernel("c/dropout.c.j2", helpers=(HELPER,) if draws else (), data=x.name, output=y.name,
                          ctype=y.ctype, count=cexpr.lit(y.numel), mask=mask.name if mask else "",
                          one=mask.store("1") if mask else "", zero=mask.store("0") if mask else "",
                          training_check=training_check, ratio=self.ratio(k) if training_check else "",
                          kept=y.store(f"{x.load('i')} / keep_share"), dropped=y.store("0"), draws=draws)


@register("Dropout", since=12)
class Dropout(Dropout1):
    """As Dropout1, training when the training_mode input is true (ratio from input 1, 0.5 when
    omitted); the seed attribute seeds the mask's draws."""

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

    def ratio(self, k):
        return f"(double)({k.input(1).load('0')})" if k.has_input(1) else "0.5"
