"""com.microsoft FusedMatMul: onnxruntime's MatMul with transposed operands and a scale (its
optimizer folds Transpose and Mul/Div by a constant into MatMul)."""
import numpy as np

from ._contrib import MS, Composite, attributes, invalid, refuse
from .registry import register


@register("FusedMatMul", since=1, domain=MS)
class MsFusedMatMul(Composite):
    """Y = alpha * A' @ B', where X' moves X's first axis behind its batch axes (transBatchX) and
    then swaps its last two axes (transX)."""
    min_inputs = 2

    def expand(self, node, e):
        attrs = attributes(node, {"alpha": 1.0, "transA": 0, "transB": 0, "transBatchA": 0, "transBatchB": 0})
        if (attrs["transBatchA"] or attrs["transBatchB"]) and not (
                len(node.inputs[0].shape) == len(node.inputs[1].shape) >= 3):
            raise invalid(node, "transBatchA and transBatchB need A and B of one rank, at least 3")
        operands = []
        for x, trans, batch in zip(node.inputs[:2], (attrs["transA"], attrs["transB"]),
                                   (attrs["transBatchA"], attrs["transBatchB"])):
            rank = len(x.shape)
            if rank < 2 and (trans or batch):
                raise refuse(node, "transposing a 1-D operand")
            perm = list(range(rank))
            if batch:
                perm = perm[1:-1] + [perm[0], perm[-1]]
            if trans:
                perm[-2], perm[-1] = perm[-1], perm[-2]
            operands.append(e.op("Transpose", [x], perm=tuple(perm)) if perm != sorted(perm) else x)
        alpha = float(attrs["alpha"])
        if alpha == 1.0:
            e.op("MatMul", operands, e.into(0))
            return
        product = e.op("MatMul", operands)
        e.op("Mul", [product, e.const(np.array(alpha, node.inputs[0].dtype.np))], e.into(0))
