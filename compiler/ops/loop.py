from .. import dtypes as dt
from ..errors import UnsupportedError
from ._control import (
    clone_body,
    element_shape,
    infer_body,
    known_symbols,
    merged_dim,
    scalar_input,
)
from .registry import OpDef, register

_TRIALS = 4


@register("Loop", since=1)
class Loop(OpDef):
    """A body run while ``i < M`` and ``cond`` hold, with loop-carried state and scan outputs.

    State may change shape between iterations: inference finds which dims vary by
    inferring a copy of the body until the state shapes stop changing; those dims
    become symbols the body binds from its inputs on every call.
    """
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        scalar_input(ctx, 0, "the trip count M", (dt.INT64,))
        scalar_input(ctx, 1, "the condition", (dt.BOOL,))
        states = [ctx.inp(i) for i in range(2, len(node.inputs))]
        body = node.subgraphs["body"]
        n_state = len(states)
        n_scan = len(body.outputs) - 1 - n_state
        if n_scan < 0 or len(body.inputs) != 2 + n_state:
            raise ctx.fail(f"the body takes {len(body.inputs)} inputs and gives {len(body.outputs)} outputs "
                           f"for {n_state} loop-carried values")
        if len(node.outputs) > n_state + n_scan:
            raise ctx.fail(f"the node has {len(node.outputs)} outputs, the body gives {n_state + n_scan}")
        shapes = node.memo.get("state_shapes")
        if shapes is None or len(shapes) != n_state:
            shapes = self._state_shapes(node, ctx, states)
            node.memo["state_shapes"] = shapes
        formal = [(dt.INT64, ()), (dt.BOOL, ())] + [(v.dtype, s, v.kind) for v, s in zip(states, shapes)]
        outs = infer_body(node, "body", formal, ctx.dims)
        if outs[0].dtype != dt.BOOL:
            raise ctx.fail(f"the body's condition output is {outs[0].dtype}, not bool")
        known = known_symbols(node)
        result = []
        for i, (v, s) in enumerate(zip(states, shapes)):
            o = outs[1 + i]
            # An optional sequence may come back as a sequence: both are sequences in C.
            same_kind = o.kind == v.kind or {o.kind, v.kind} == {"sequence", "optional_sequence"}
            if o.dtype != v.dtype or not same_kind:
                raise ctx.fail(f"loop-carried value {i} is {v.type_str()} but the body gives {o.type_str()}")
            if not v.is_tensor:
                result.append((v.dtype, element_shape(ctx.dims, [s, o.shape], node.label), o.kind))
                continue
            result.append((v.dtype, tuple(merged_dim(node, ctx.dims, f"{i}[{a}]", [d], known)
                                          for a, d in enumerate(s))))
        trips = self._static_trip_count(node)
        for j in range(n_scan):
            o = outs[1 + n_state + j]
            if not o.is_tensor:
                raise UnsupportedError(f"{node.label}: scan output {j} is a {o.kind}, not a tensor")
            first = trips if trips is not None else merged_dim(node, ctx.dims, "trips", [None], known)
            result.append((o.dtype, (first,) + tuple(
                merged_dim(node, ctx.dims, f"{n_state + j}[{a + 1}]", [d], known) for a, d in enumerate(o.shape))))
        return result[:len(node.outputs)]

    def _state_shapes(self, node, ctx, states):
        """Shapes of the state as the body sees it: a dim that changes between iterations is a symbol."""
        shapes = [tuple(v.shape) if v.shape is not None else None for v in states]
        varying: set[str] = set()
        for _ in range(_TRIALS):
            trial = clone_body(node.subgraphs["body"])
            formal = [(dt.INT64, ()), (dt.BOOL, ())] + [(v.dtype, s, v.kind) for v, s in zip(states, shapes)]
            outs = infer_body(node, "body", formal, ctx.dims, body=trial)
            changed = False
            new_shapes = []
            for i, s in enumerate(shapes):
                if not states[i].is_tensor:  # a sequence: element dims are only described
                    new_shapes.append(s)
                    continue
                got = outs[1 + i].shape
                if len(got) != len(s):
                    raise UnsupportedError(f"{node.label}: loop-carried value {i} changes rank "
                                           f"({len(s)} -> {len(got)}) between iterations")
                dims = []
                for a, (d, e) in enumerate(zip(s, got)):
                    if d == e or d in varying:
                        dims.append(d)
                    else:
                        sym = ctx.dims.fresh_input(f"{node.label} state {i} axis {a}")
                        varying.add(sym)
                        dims.append(sym)
                        changed = True
                new_shapes.append(tuple(dims))
            shapes = new_shapes
            if not changed:
                return shapes
        raise UnsupportedError(f"{node.label}: the shapes of its loop-carried values do not settle")

    @staticmethod
    def _static_trip_count(node):
        """M when the loop always runs M times: constant M and a condition that stays true."""
        m, cond = node.input(0), node.input(1)
        body = node.subgraphs["body"]
        if m is None or m.const is None:
            return None
        if cond is not None and (cond.const is None or not bool(cond.const.reshape(-1)[0])):
            return None
        c = body.outputs[0]
        stays = c is body.inputs[1] or (c.const is not None and bool(c.const.reshape(-1)[0]))
        return max(int(m.const.reshape(-1)[0]), 0) if stays else None

    def lower(self, node, k):
        body = node.subgraphs["body"]
        n_state = len(node.inputs) - 2
        states = [k.input(2 + i).data() | {"free": "free" if k.input(2 + i).kind == "tensor" else "onnxc_seq_free"}
                  for i in range(n_state)]
        sub = k.body("body")
        scans = sub["outputs"][1 + n_state:]
        results = [{"name": t.name, "dims": k.output_dims(i)} for i, t in enumerate(k.outputs)]
        # Scan output dims before any iteration ran: what the enclosing graph knows, else the
        # body's static dims, else 0.
        elem_static = []
        for j, v in enumerate(body.outputs[1 + n_state:]):
            dims = k.output_dims(n_state + j)[1:] if n_state + j < len(k.outputs) else [{"ptr": 1}] * len(v.shape)
            elem_static.append([r["value"] if not r["ptr"] else (d if isinstance(d, int) else 0)
                                for r, d in zip(dims, v.shape)])
        return k.kernel("c/loop.c.j2", allocates=True,
                        m=k.inputs[0].data() if k.has_input(0) else None,
                        cond=k.inputs[1].data() if k.has_input(1) else None,
                        states=states, scans=scans, body=sub, results=results,
                        n_results=len(node.outputs), elem_static=elem_static,
                        state_out=sub["outputs"][1:1 + n_state],
                        state_args=[f"state[{i}]" for i in range(n_state)],
                        state_dims_args=[f"state_dims[{i}]" for i in range(sum(s["rank"] for s in states))])
