from ..errors import UnsupportedError
from ._control import element_shape, infer_body
from ._sequence import require_rank
from .registry import OpDef, register


@register("SequenceMap", since=17)
class SequenceMap(OpDef):
    """The body applied to each position of the input sequences (tensor inputs are passed
    whole every time); each body output is collected into an output sequence."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        if xs[0].kind != "sequence":
            raise ctx.fail("the first input must be a sequence")
        formal = node.memo.get("formal")
        if formal is None:
            formal = []
            for i, x in enumerate(xs):
                if x.kind == "sequence":
                    require_rank(node, x)
                    shape = tuple(d if isinstance(d, int) else ctx.dims.fresh_input(f"{node.label} input {i} element")
                                  for d in x.shape)
                    formal.append((x.dtype, shape))
                elif x.is_tensor:
                    formal.append((x.dtype, x.shape))
                else:
                    raise UnsupportedError(f"{node.label}: input {i} is a {x.kind}")
            node.memo["formal"] = formal
        outs = infer_body(node, "body", formal, ctx.dims)
        if len(outs) != len(node.outputs):
            raise ctx.fail(f"the body gives {len(outs)} outputs, the node has {len(node.outputs)}")
        result = []
        for o in outs:
            if not o.is_tensor:
                raise UnsupportedError(f"{node.label}: body outputs must be tensors")
            result.append((o.dtype, element_shape(ctx.dims, [o.shape], node.label), "sequence"))
        return result

    def lower(self, node, k):
        body = k.body("body")
        args, dims, seqs = [], [], []
        for i, x in enumerate(node.inputs):
            t = k.input(i)
            if x.kind == "sequence":
                seqs.append({"name": t.name, "rank": len(x.shape)})
                args.append(f"{t.name}->data[i]")
                dims += [f"onnxc_seq_dims({t.name}, i)[{d}]" for d in range(len(x.shape))]
            else:
                args.append(t.name)
                dims += t.data()["dims"]
        outs = [{"name": t.name, "itemsize": t.dtype.itemsize, "rank": r["rank"]}
                for t, r in zip(k.outputs, body["outputs"])]
        return k.kernel("c/sequence_map.c.j2", allocates=True, body=body, seqs=seqs, outs=outs, args=args, dims=dims)
