from ...codegen import cexpr
from ..errors import UnsupportedError
from ._control import infer_body, known_symbols, merged_dim
from .registry import OpDef, register


def _axes(values, count: int, ranks: list[int], what: str, ctx) -> list[int]:
    axes = list(values) if values else [0] * count
    if len(axes) != count:
        raise ctx.fail(f"{what} has {len(axes)} entries for {count} tensors")
    out = []
    for a, r in zip(axes, ranks):
        if not -r <= a < r:
            raise ctx.fail(f"{what}: axis {a} is out of range for rank {r}")
        out.append(a + r if a < 0 else a)
    return out


@register("Scan", since=9)
class Scan(OpDef):
    """The body runs once per slice of the scan inputs, threading state variables;
    per-iteration outputs are stacked along their scan axis."""
    foldable = False
    allocates_outputs = True

    def _layout(self, node, ctx):
        m = node.attrs["num_scan_inputs"]
        n_state = len(node.inputs) - m
        if n_state < 0 or m < 1:
            raise ctx.fail(f"num_scan_inputs={m} does not fit {len(node.inputs)} inputs")
        scans = [node.inputs[n_state + j] for j in range(m)]
        if any(v is None for v in scans):
            raise ctx.fail("a scan input is missing")
        in_axes = _axes(node.attrs.get("scan_input_axes"), m, [v.rank for v in scans], "scan_input_axes", ctx)
        return n_state, m, scans, in_axes

    def infer(self, node, ctx):
        n_state, m, scans, in_axes = self._layout(node, ctx)
        states = [node.inputs[i] for i in range(n_state)]
        trips = scans[0].shape[in_axes[0]]
        for v, a in zip(scans[1:], in_axes[1:]):
            trips = ctx.dims.same(trips, v.shape[a])
        formal = [(v.dtype, v.shape) for v in states] + \
            [(v.dtype, v.shape[:a] + v.shape[a + 1:]) for v, a in zip(scans, in_axes)]
        outs = infer_body(node, "body", formal, ctx.dims)
        k = len(outs) - n_state
        if k < 0 or len(node.outputs) != len(outs):
            raise ctx.fail(f"the body gives {len(outs)} outputs, the node has {len(node.outputs)}")
        known = known_symbols(node)
        result = []
        for i, v in enumerate(states):
            o = outs[i]
            if o.dtype != v.dtype or len(o.shape) != len(v.shape):
                raise ctx.fail(f"state {i} is {v.type_str()} but the body gives {o.type_str()}")
            for a, (d, e) in enumerate(zip(v.shape, o.shape)):
                if isinstance(d, int) and isinstance(e, int) and d != e:
                    raise UnsupportedError(f"{node.label}: state {i} changes shape between iterations")
            result.append((v.dtype, v.shape))
        out_axes = _axes(node.attrs.get("scan_output_axes"), k, [o.rank + 1 for o in outs[n_state:]],
                         "scan_output_axes", ctx)
        for j, (o, a) in enumerate(zip(outs[n_state:], out_axes)):
            elem = [merged_dim(node, ctx.dims, f"{n_state + j}[{x}]", [d], known) for x, d in enumerate(o.shape)]
            result.append((o.dtype, tuple(elem[:a]) + (trips,) + tuple(elem[a:])))
        return result

    def lower(self, node, k):
        n_state, m, _, in_axes = self._layout(node, k)
        n_out = len(node.outputs) - n_state
        dirs_in = list(node.attrs.get("scan_input_directions") or [0] * m)
        dirs_out = list(node.attrs.get("scan_output_directions") or [0] * n_out)
        out_axes = list(node.attrs.get("scan_output_axes") or [0] * n_out)
        states = [k.input(i).data() for i in range(n_state)]
        scans = []
        for j in range(m):
            t = k.input(n_state + j)
            a = in_axes[j]
            scans.append(t.data() | {"axis": a, "reverse": bool(dirs_in[j]),
                                     "outer": cexpr.lit(cexpr.prod(t.dims[:a])), "inner": cexpr.lit(cexpr.prod(t.dims[a + 1:])),
                                     "slice_dims": [str(d) for d in (t.data()["dims"][:a] + t.data()["dims"][a + 1:])],
                                     "itemsize": t.dtype.itemsize})
        outputs = []
        for j in range(n_out):
            t = k.outputs[n_state + j]
            a = out_axes[j] + t.rank if out_axes[j] < 0 else out_axes[j]
            outputs.append({"name": t.name, "axis": a, "reverse": bool(dirs_out[j]), "itemsize": t.dtype.itemsize,
                            "rank": t.rank - 1, "dims": k.output_dims(n_state + j)})
        body = k.body("body")
        return k.kernel("c/scan.c.j2", allocates=True, states=states, scans=scans, outputs=outputs, body=body,
                        state_results=[{"name": k.outputs[i].name, "dims": k.output_dims(i),
                                        "itemsize": k.outputs[i].dtype.itemsize} for i in range(n_state)],
                        trips=scans[0]["dims"][in_axes[0]],
                        state_args=[f"state[{i}]" for i in range(n_state)],
                        slice_args=[f"slice[{j}]" for j in range(m)],
                        state_dims_args=[f"state_dims[{i}]" for i in range(sum(s["rank"] for s in states))],
                        slice_dims_args=[d for s in scans for d in s["slice_dims"]])
