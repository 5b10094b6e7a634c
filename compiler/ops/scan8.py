"""Scan opset 8: the batched form, with a leading batch axis and an optional sequence_lens.

Inputs: sequence_lens (optional, int64 [batch]), then the initial states [batch, ...], then
the scan inputs [batch, max_seq, ...]. For each batch entry the states start from that entry's
initial value and the body runs sequence_lens[b] times (max_seq without sequence_lens), each
time on slice t of the entry's scan inputs (t counted from the end of the sequence for a
reverse direction). Outputs: the final states [batch, ...], then the scan outputs
[batch, max_seq, ...], the body's values in iteration order, zero past a sequence's length.
"""
from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import ShapeError, UnsupportedError
from ._control import infer_body, known_symbols, merged_dim
from .registry import OpDef, register


@register("Scan", since=8, until=8)
class Scan8(OpDef):
    """Batched Scan: the body runs over each batch entry's sequence, threading state variables;
    per-iteration outputs are stacked along axis 1."""
    foldable = False
    allocates_outputs = True

    def _layout(self, node, ctx):
        m = node.attrs["num_scan_inputs"]
        n_state = len(node.inputs) - 1 - m
        if n_state < 0 or m < 1:
            raise ctx.fail(f"num_scan_inputs={m} does not fit {len(node.inputs)} inputs")
        states = [node.inputs[1 + i] for i in range(n_state)]
        scans = [node.inputs[1 + n_state + j] for j in range(m)]
        if any(v is None for v in states + scans):
            raise ctx.fail("a state or scan input is missing")
        directions = list(node.attrs.get("directions") or [0] * m)
        if len(directions) != m or any(d not in (0, 1) for d in directions):
            raise ctx.fail(f"directions {directions} must be {m} values of 0 or 1")
        return n_state, m, states, scans, directions

    def infer(self, node, ctx):
        n_state, _, states, scans, _ = self._layout(node, ctx)
        for v in scans:
            if v.rank < 2:
                raise ctx.fail(f"scan input {v.name!r} must have a batch and a sequence axis, its shape is "
                               f"{list(v.shape)}")
        for v in states:
            if v.rank < 1:
                raise ctx.fail(f"state {v.name!r} must have a batch axis")
        batch, seq = scans[0].shape[0], scans[0].shape[1]
        try:
            for v in scans[1:]:
                batch = ctx.dims.same(batch, v.shape[0])
                seq = ctx.dims.same(seq, v.shape[1])
            for v in states:
                batch = ctx.dims.same(batch, v.shape[0])
            if ctx.has(0):
                lens = ctx.inp(0)
                if lens.dtype != dt.INT64 or lens.rank != 1:
                    raise ctx.fail(f"sequence_lens must be a 1-D int64 tensor, not {lens.type_str()}")
                batch = ctx.dims.same(batch, lens.shape[0])
        except ShapeError as e:
            raise ctx.fail(f"batch or sequence sizes differ: {e}") from None
        formal = [(v.dtype, v.shape[1:]) for v in states] + [(v.dtype, v.shape[2:]) for v in scans]
        outs = infer_body(node, "body", formal, ctx.dims)
        if len(outs) < n_state or len(node.outputs) != len(outs):
            raise ctx.fail(f"the body gives {len(outs)} outputs, the node has {len(node.outputs)}")
        known = known_symbols(node)
        result = []
        for i, v in enumerate(states):
            o = outs[i]
            if not o.is_tensor or o.dtype != v.dtype or len(o.shape) != v.rank - 1:
                raise ctx.fail(f"state {i} is {v.type_str()} but the body gives {o.type_str()}")
            for d, e in zip(v.shape[1:], o.shape):
                if isinstance(d, int) and isinstance(e, int) and d != e:
                    raise UnsupportedError(f"{node.label}: state {i} changes shape between iterations")
            result.append((v.dtype, v.shape))
        for j, o in enumerate(outs[n_state:]):
            if not o.is_tensor:
                raise UnsupportedError(f"{node.label}: scan output {j} is not a tensor")
            elem = [merged_dim(node, ctx.dims, f"{n_state + j}[{x}]", [d], known) for x, d in enumerate(o.shape)]
            result.append((o.dtype, (batch, seq) + tuple(elem)))
        return result

    def lower(self, node, k):
        n_state, m, _, _, directions = self._layout(node, k)
        n_out = len(node.outputs) - n_state
        states = []
        for i in range(n_state):
            t = k.input(1 + i)
            d = t.data()
            states.append({"name": t.name, "rank": t.rank - 1, "dims": d["dims"][1:],
                           "numel": cexpr.lit(cexpr.prod(t.dims[1:])), "itemsize": t.dtype.itemsize})
        scans = []
        for j in range(m):
            t = k.input(1 + n_state + j)
            d = t.data()
            scans.append({"name": t.name, "dims": d["dims"][2:], "reverse": bool(directions[j]),
                          "inner": cexpr.lit(cexpr.prod(t.dims[2:])), "itemsize": t.dtype.itemsize})
        first = k.input(1 + n_state)
        outputs = []
        for j in range(n_out):
            t = k.outputs[n_state + j]
            outputs.append({"name": t.name, "rank": t.rank - 2, "itemsize": t.dtype.itemsize,
                            "dims": k.output_dims(n_state + j)})
        body = k.body("body")
        return k.kernel("c/scan8.c.j2", allocates=True, states=states, scans=scans, outputs=outputs, body=body,
                        state_results=[{"name": k.outputs[i].name, "dims": k.output_dims(i)}
                                       for i in range(n_state)],
                        batch=cexpr.lit(first.dims[0]), max_seq=cexpr.lit(first.dims[1]),
                        lens=k.input(0).name if k.has_input(0) else None,
                        state_args=[f"state[{i}]" for i in range(n_state)],
                        slice_args=[f"slice[{j}]" for j in range(m)],
                        state_dims_args=[d for s in states for d in s["dims"]],
                        slice_dims_args=[d for s in scans for d in s["dims"]])
