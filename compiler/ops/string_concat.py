from .. import dtypes as dt
from ._binary import Broadcasting
from ._elementwise import elementwise_kernel
from .registry import register


@register("StringConcat", since=20)
class StringConcat(Broadcasting):
    """Elementwise concatenation of two string tensors, broadcasting."""
    types = (dt.STRING,)

    def lower(self, node, k):
        a, b = k.input(0), k.input(1)
        kernel = elementwise_kernel(k, [a, b], lambda v: f"onnxc_str_concat(ctx, {v[0]}, {v[1]})")
        kernel.helpers.append("c/helpers/strings.c.j2")
        return kernel
