"""com.microsoft DynamicQuantizeLSTM: the LSTM quantize_dynamic makes, with int8/uint8 weights
and the input and hidden state quantized to uint8 on every run."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("DynamicQuantizeLSTM", since=1, domain=ql.MS)
class DynamicQuantizeLSTM(OpDef):
    """LSTM (gates i, o, f, c, peepholes, clip, input_forget: f = 1 - i) with W [dirs, input, 4H] and
    R [dirs, H, 4H] quantized, scales and zero points per direction or per gate row. X, then
    each step's hidden state, are quantized to uint8 like DynamicQuantizeLinear; the int32 sums
    are scaled in float32. Default activations only; no sequence_lens."""
    formal_inputs = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
                     "W_scale", "W_zero_point", "R_scale", "R_zero_point")
    formal_outputs = ("Y", "Y_h", "Y_c")

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"activations": None, "activation_alpha": None, "activation_beta": None,
                                  "clip": None, "direction": "forward", "hidden_size": None, "input_forget": 0})
        a = node.attrs
        if a["activations"] not in (None, ("Sigmoid", "Tanh", "Tanh"), ("Sigmoid", "Tanh", "Tanh") * 2) \
                or a["activation_alpha"] or a["activation_beta"]:
            raise UnsupportedError(f"{node.label}: activations other than Sigmoid, Tanh, Tanh")
        if ctx.has(4):
            raise UnsupportedError(f"{node.label}: sequence_lens (onnxc runs every sequence to its end)")
        if a["direction"] not in ("forward", "reverse", "bidirectional"):
            raise ctx.fail(f"direction {a['direction']!r} is not forward, reverse or bidirectional")
        dirs = 2 if a["direction"] == "bidirectional" else 1
        x, w, r = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        if x.dtype is not dt.FLOAT:
            raise ctx.fail(f"X type {x.dtype} should be float")
        for t, what in ((w, "W"), (r, "R")):
            if t.dtype not in ql.INT8S or len(t.shape) != 3:
                raise ctx.fail(f"{what} {t.dtype}{list(t.shape)} should be int8 or uint8 of rank 3")
        if len(x.shape) != 3:
            raise ctx.fail(f"X must be 3-D, got {list(x.shape)}")
        seq, batch, _ = x.shape
        hidden = r.shape[1]
        if a["hidden_size"] is not None:
            hidden = ctx.dims.same(hidden, a["hidden_size"])
        gate_rows = ctx.dims.mul(4, hidden)
        d = ctx.dims
        for t in (w, r):
            d.same(t.shape[0], dirs)
            d.same(t.shape[2], gate_rows)
        d.same(w.shape[1], x.shape[2])
        expect = {3: (dirs, d.mul(8, hidden)), 5: (dirs, batch, hidden), 6: (dirs, batch, hidden),
                  7: (dirs, d.mul(3, hidden))}
        for i, shape in expect.items():
            if ctx.has(i):
                if ctx.inp(i).dtype is not dt.FLOAT or len(ctx.inp(i).shape) != len(shape):
                    raise ctx.fail(f"input {i} {ctx.inp(i).dtype}{list(ctx.inp(i).shape)} should be float{list(shape)}")
                for have, want in zip(ctx.inp(i).shape, shape):
                    d.same(have, want)
        for i, weights in ((8, w), (9, w), (10, r), (11, r)):
            v = ctx.inp(i)
            want = dt.FLOAT if i in (8, 10) else weights.dtype
            if v.dtype is not want:
                raise ctx.fail(f"input {i} type {v.dtype} should be {want}")
            if tuple(v.shape) not in ((dirs,), (dirs, gate_rows)):
                raise ctx.fail(f"input {i} shape {list(v.shape)} should be [{dirs}] or [{dirs}, {gate_rows}]")
        state = (dirs, batch, hidden)
        outs = [(dt.FLOAT, (seq, dirs, batch, hidden)), (dt.FLOAT, state), (dt.FLOAT, state)]
        if len(node.outputs) > 3:
            raise ctx.fail("DynamicQuantizeLSTM has at most 3 outputs")
        return outs[:len(node.outputs)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, r = k.input(0), k.input(1), k.input(2)
        seq, batch, inp = x.dims
        hidden = r.dims[1]
        dirs = w.dims[0]
        h = cexpr.lit(hidden)

        def per_row(i: int) -> str:
            t = k.input(i)
            index = "d" if t.rank == 1 else f"d * 4 * {h} + j"
            return f"{t.name}[{index}]"
        bias = ""
        if k.has_input(3):
            b = k.input(3).name
            bias = f" + {b}[d * 8 * {h} + j] + {b}[d * 8 * {h} + 4 * {h} + j]"
        outs = [t.name for t in k.outputs] + [None] * (3 - len(k.outputs))
        clip = node.attrs["clip"]
        kernel = k.kernel(
            "c/dynamic_quantize_lstm.c.j2", helpers=(ql.HELPER,), X=x.name, W=w.name, R=r.name,
            SEQ=cexpr.lit(seq), BATCH=cexpr.lit(batch), INPUT=cexpr.lit(inp), H=h, dirs=dirs,
            reverse=int(node.attrs["direction"] == "reverse"), bias=bias,
            w_scale=per_row(8), w_zero=per_row(9), r_scale=per_row(10), r_zero=per_row(11),
            initial_h=k.input(5).name if k.has_input(5) else None,
            initial_c=k.input(6).name if k.has_input(6) else None,
            P=k.input(7).name if k.has_input(7) else None,
            clip=None if clip is None else f"{float(clip)!r}f", input_forget=int(node.attrs["input_forget"]),
            Y=outs[0], Y_h=outs[1], Y_c=outs[2])
        rows = cexpr.mul(seq, batch)
        kernel.scratch.update({
            "xw": cexpr.mul(rows, 4, hidden, 4), "gates": cexpr.mul(batch, 4, hidden, 4),
            "h": cexpr.mul(batch, hidden, 4), "c": cexpr.mul(batch, hidden, 4),
            "qx": cexpr.mul(rows, inp), "qh": cexpr.mul(batch, hidden)})
        return kernel
