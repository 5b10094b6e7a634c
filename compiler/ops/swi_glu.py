from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import elementwise_kernel
from .registry import OpDef, register


@register("SwiGLU", since=28)
class SwiGLU(OpDef):
    """Y = A * sigmoid(alpha * A) * B, A and B of one shape (no broadcasting)."""

    def infer(self, node, ctx):
        a, b = ctx.inp(0), ctx.inp(1)
        if a.dtype not in dt.FLOATS or b.dtype != a.dtype:
            raise ctx.fail(f"A and B must share a float type, got {a.dtype} and {b.dtype}")
        if len(a.shape) != len(b.shape):
            raise ctx.fail(f"A and B shapes differ: {a.shape} and {b.shape}")
        try:
            shape = tuple(ctx.dims.same(x, y) for x, y in zip(a.shape, b.shape))
        except ShapeError:
            raise ctx.fail(f"A and B shapes differ: {a.shape} and {b.shape}") from None
        return [(a.dtype, shape)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a = k.input(0)
        t = a.dtype
        f = "" if a.compute == "double" else "f"
        alpha = repr(float(node.attrs.get("alpha", 1.0))) + f
        # float16/bfloat16 round the gate like the reference, which computes in the input type
        rnd = {dt.FLOAT16: "onnxc_round_f16({})", dt.BFLOAT16: "onnxc_round_bf16({})"}.get(t, "{}")

        def scalar(v: list[str]) -> str:
            gate = rnd.format(f"1 / (1 + exp{f}(-{alpha} * {v[0]}))")
            return f"{rnd.format(f'{v[0]} * {gate}')} * {v[1]}"
        kernel = elementwise_kernel(k, [a, k.input(1)], scalar)
        kernel.helpers.append("c/helpers/round_half.c.j2")
        return kernel
