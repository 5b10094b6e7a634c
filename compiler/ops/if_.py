from .. import dtypes as dt
from ..errors import RankKnownAtRunTime
from ._control import element_shape, infer_body, known_symbols, merged_dim, scalar_input
from .registry import OpDef, register


@register("If", since=1)
class If(OpDef):
    """Runs then_branch or else_branch on a one-element bool condition.

    Each branch is its own function; the node calls one and adopts its outputs,
    whose shapes may differ between the branches.
    """
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        scalar_input(ctx, 0, "the condition", (dt.BOOL,))
        then = infer_body(node, "then_branch", [], ctx.dims)
        other = infer_body(node, "else_branch", [], ctx.dims)
        if len(then) != len(other) or len(then) != len(node.outputs):
            raise ctx.fail(f"the branches give {len(then)} and {len(other)} outputs, the node has {len(node.outputs)}")
        known = known_symbols(node)
        out = []
        for i, (a, b) in enumerate(zip(then, other)):
            if a.dtype != b.dtype or a.kind != b.kind:
                raise ctx.fail(f"output {i} is {a.type_str()} in then_branch and {b.type_str()} in else_branch")
            if not a.is_tensor:
                out.append((a.dtype, element_shape(ctx.dims, [a.shape, b.shape], node.label), a.kind))
                continue
            if len(a.shape) != len(b.shape):
                raise RankKnownAtRunTime(f"{node.label}: output {i} has rank {len(a.shape)} in then_branch and "
                                       f"{len(b.shape)} in else_branch, on a condition known only at run time")
            out.append((a.dtype, tuple(merged_dim(node, ctx.dims, f"{i}[{axis}]", [x, y], known)
                                       for axis, (x, y) in enumerate(zip(a.shape, b.shape)))))
        return out

    def inline(self, node):
        """A constant condition: the branch taken replaces the node (the other one may not
        even fit these inputs, e.g. the 3-D path of a function expanded for 2-D)."""
        cond = node.inputs[0] if node.inputs else None
        if cond is None or cond.const is None or cond.const.size != 1:
            return None
        body = node.subgraphs["then_branch" if bool(cond.const.reshape(-1)[0]) else "else_branch"]
        if len(body.outputs) != len(node.outputs):
            return None
        return body.nodes, body.outputs

    def lower(self, node, k):
        branches = [k.body("then_branch"), k.body("else_branch")]
        return k.kernel("c/if.c.j2", cond=k.input(0).data(), branches=branches,
                        results=[{"name": t.name, "dims": k.output_dims(i),
                                  "free": "free" if t.kind == "tensor" else "onnxc_seq_free"}
                                 for i, t in enumerate(k.outputs)])
