"""Shared inference and lowering of the recurrent ops RNN, GRU and LSTM.

All three read X (seq_length, batch_size, input_size) (or batch-major with
layout 1), weights W / R / B stacked per direction with the gates in the
spec's order, optional per-batch sequence_lens, initial_h (and initial_c), and
produce Y (all hidden states), Y_h (the last valid one) and, for LSTM, Y_c.
The ``c/recurrent.c.j2`` kernel runs every (direction, batch entry) sequence
on its own: matrix-vector products into a scratch row of gate pre-activations,
then the op's cell update.

float32 takes a faster path: the input projections of all steps are one GEMM
(X W^T plus the biases, before the recurrence), and each step's R h is a SIMD
matrix-vector product over R^T packed into column panels (at compile time when
R is a constant, else once per run).
"""
from __future__ import annotations

from typing import ClassVar, Optional

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext, TensorRef
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from . import _gemm
from ._elementwise import check_dtype
from .registry import InferContext, OpDef

TYPES = dt.FLOATS

# Activation name (lower case) -> (number of activation_alpha/beta values it takes, default alpha, beta).
ACTIVATIONS: dict[str, tuple[int, float, float]] = {
    "relu": (0, 0.0, 0.0), "tanh": (0, 0.0, 0.0), "sigmoid": (0, 0.0, 0.0),
    "affine": (2, 1.0, 0.0), "leakyrelu": (1, 0.01, 0.0), "thresholdedrelu": (1, 1.0, 0.0),
    "scaledtanh": (2, 1.0, 1.0), "hardsigmoid": (2, 0.2, 0.5), "elu": (1, 1.0, 0.0),
    "softsign": (0, 0.0, 0.0), "softplus": (0, 0.0, 0.0),
}


class Recurrent(OpDef):
    """Base of RNN / GRU / LSTM; subclasses set the cell kind and its gate count."""
    kind: ClassVar[str] = ""
    gates: ClassVar[int] = 1
    # The spec's default activations for both directions (forward's, then reverse's).
    default_activations: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[int] = 2     # Y, Y_h (and Y_c for LSTM)

    def infer(self, node: Node, ctx: InferContext):
        try:
            return self._infer(node, ctx)
        except ShapeError as e:
            if str(e).startswith(node.label):
                raise
            raise ctx.fail(str(e)) from None

    def _infer(self, node: Node, ctx: InferContext):
        x, w, r = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        check_dtype(ctx, x.dtype, TYPES, "X")
        for i in range(1, 8):
            if ctx.has(i) and i != 4 and ctx.inp(i).dtype != x.dtype:
                raise ctx.fail(f"input {i} type {ctx.inp(i).dtype} differs from X type {x.dtype}")
        if ctx.has(4):
            check_dtype(ctx, ctx.inp(4).dtype, (dt.INT32,), "sequence_lens")
        dirs = num_directions(node, ctx.fail)
        activations(node, self.default_activations, dirs, ctx.fail)
        for name, v, rank in (("X", x, 3), ("W", w, 3), ("R", r, 3)):
            if len(v.shape) != rank:
                raise ctx.fail(f"{name} must be {rank}-D, got {list(v.shape)}")
        batch_major = node.attrs.get("layout", 0) == 1
        seq, batch, _ = (x.shape[1], x.shape[0], x.shape[2]) if batch_major else x.shape
        hidden = r.shape[2]
        if "hidden_size" in node.attrs:
            hidden = ctx.dims.same(hidden, node.attrs["hidden_size"])
        gate_rows = ctx.dims.mul(self.gates, hidden)
        d = ctx.dims
        d.same(w.shape[0], dirs)
        d.same(r.shape[0], dirs)
        d.same(w.shape[1], gate_rows)
        d.same(r.shape[1], gate_rows)
        d.same(w.shape[2], x.shape[2])
        expect = {3: (dirs, ctx.dims.mul(2, gate_rows)), 4: (batch,),
                  5: (batch, dirs, hidden) if batch_major else (dirs, batch, hidden)}
        if self.kind == "lstm":
            expect[6] = expect[5]
            expect[7] = (dirs, ctx.dims.mul(3, hidden))
        names = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
        for i, shape in expect.items():
            if ctx.has(i):
                got = ctx.inp(i).shape
                if len(got) != len(shape):
                    raise ctx.fail(f"{names[i]} must be {len(shape)}-D, got {list(got)}")
                for a, b in zip(got, shape):
                    d.same(a, b)
        state = (batch, dirs, hidden) if batch_major else (dirs, batch, hidden)
        y = (batch, seq, dirs, hidden) if batch_major else (seq, dirs, batch, hidden)
        outs = [(x.dtype, y), (x.dtype, state), (x.dtype, state)][:self.outputs]
        if len(node.outputs) > len(outs):
            raise ctx.fail(f"{node.op_type} has at most {len(outs)} outputs")
        return outs[:len(node.outputs)]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, w, r = k.input(0), k.input(1), k.input(2)
        ct = x.compute
        dirs = num_directions(node, k.unsupported)
        batch_major = node.attrs.get("layout", 0) == 1
        seq, batch = (x.dims[1], x.dims[0]) if batch_major else (x.dims[0], x.dims[1])
        hidden = r.dims[2]
        acts = [activation_expr(name, alpha, beta, ct)
                for name, alpha, beta in activations(node, self.default_activations, dirs, k.unsupported)]
        per_dir = len(self.default_activations) // 2
        clip = node.attrs.get("clip")

        def opt(i: int) -> Optional[dict]:
            return loader(k.input(i)) if k.has_input(i) else None

        outs = [loader(t) for t in k.outputs] + [None] * (3 - len(k.outputs))
        data = {
            "kind": self.kind, "gates": self.gates, "ct": ct, "batch_major": batch_major,
            "seq_length": cexpr.lit(seq), "batch_size": cexpr.lit(batch), "input_size": cexpr.lit(x.dims[2]),
            "hidden_size": cexpr.lit(hidden), "num_directions": dirs,
            "reverse": node.attrs.get("direction", "forward") == "reverse",
            "op": c_string(f"{node.op_type}: sequence_lens value out of range"),
            "X": loader(x), "W": loader(w), "R": loader(r), "B": opt(3), "lens": opt(4),
            "initial_h": opt(5), "initial_c": opt(6) if self.kind == "lstm" else None,
            "P": opt(7) if self.kind == "lstm" else None,
            "Y": outs[0], "Y_h": outs[1], "Y_c": outs[2],
            # Activations per direction: "{}" stands for the operand (a plain variable).
            "acts": [acts[i * per_dir:(i + 1) * per_dir] for i in range(dirs)],
            "clip": None if clip is None else _literal(float(clip), ct),
            "fmin": "fmin" if ct == "double" else "fminf", "fmax": "fmax" if ct == "double" else "fmaxf",
            "one": _literal(1.0, ct),
            "linear_before_reset": int(node.attrs.get("linear_before_reset", 0)),
            "input_forget": int(node.attrs.get("input_forget", 0)),
        }
        data["fast"] = self.fast_data(node, k, dirs) if x.dtype is dt.FLOAT else None
        kernel = k.kernel("c/recurrent.c.j2", helpers=(_gemm.HELPER,) if data["fast"] else (), **data)
        size = 8 if ct == "double" else 4
        # gates: the pre-activations of one step; state: H_t (plus C_t for LSTM, r (.) H_t for GRU).
        # (the threads' split of the units keeps H_{t-1} and writes H_t beside it)
        states = (1 if self.kind == "rnn" else 2) + (1 if data["fast"] and data["fast"]["split"] else 0)
        kernel.scratch = {"gates": cexpr.mul(self.gates, hidden, size), "state": cexpr.mul(states, hidden, size)}
        if data["fast"]:
            rows = cexpr.mul(seq, batch)
            gate_rows = cexpr.mul(self.gates, hidden)
            kernel.scratch["xw"] = cexpr.mul(rows, gate_rows, 4)
            if self.kind == "gru":
                kernel.scratch["hr"] = cexpr.mul(hidden, 4)
            if k.has_input(3) and data["fast"]["bias"] is None:
                kernel.scratch["bias"] = cexpr.mul(gate_rows, 4)
            kernel.scratch["pack"] = _gemm.pack_bytes(_gemm.FLOAT, rows, gate_rows, x.dims[2],
                                                      target=k.target)
            if data["fast"]["R_packed"] is None:
                kernel.scratch["rpack"] = cexpr.mul(_panel_cols(gate_rows), hidden, 4)
        return kernel

    def fast_data(self, node: Node, k: KernelContext, dirs: int) -> dict:
        """Template data of the float32 path: per direction, the compile-time packed W^T and
        R^T (GRU: R^T of z, r and of the candidate apart) and summed biases, where constant."""
        w, r = k.input(1), k.input(2)
        hidden = r.dims[2]
        nr = k.target.gemm_nr
        data: dict = {"W_packed": None, "R_packed": None, "bias": None, "split": None}
        split = self.split(node, hidden, k)
        if k.target.prepack and w.value is not None:
            data["W_packed"] = [k.constant(f"W{d}_packed", _gemm.pack_cols(np.asarray(w.value[d], np.float32).T, nr))
                                for d in range(dirs)]
        if k.target.prepack and r.value is not None:
            packed = []
            for d in range(dirs):
                rd = np.asarray(r.value[d], np.float32)
                # (GRU: R^T of z and r apart from the candidate's)
                recurrent = rd[:2 * hidden] if self.kind == "gru" else rd
                if split:   # each gate's R^T in panels of its own, so that a thread's units start a panel
                    rp = np.concatenate([_gemm.pack_cols(recurrent[g * hidden:(g + 1) * hidden].T, nr).ravel()
                                         for g in range(len(recurrent) // hidden)])
                else:
                    rp = _gemm.pack_cols(recurrent.T, nr)
                packed.append((k.constant(f"R{d}_packed", rp),
                               k.constant(f"R{d}_packed_h", _gemm.pack_cols(rd[2 * hidden:].T, nr))
                               if self.kind == "gru" else None))
            data["R_packed"] = packed
            data["split"] = split
        if k.has_input(3) and k.input(3).value is not None:
            b = np.asarray(k.input(3).value, np.float32)
            g = self.gates * hidden
            sums = b[:, :g].copy()
            recurrent_rows = 2 * hidden if self.kind == "gru" else g  # GRU: R_bh goes with R_h h
            sums[:, :recurrent_rows] += b[:, g:g + recurrent_rows]
            data["bias"] = [k.constant(f"bias{d}", sums[d]) for d in range(dirs)]
        return data

    def split(self, node: Node, hidden: int, k: KernelContext) -> Optional[dict]:
        """How a step's products R H_{t-1} and cell updates are split between the threads, by
        hidden units, each thread's units a whole number of column panels of every gate
        (None: the steps run on one thread). Each thread then reads its own part of R at every
        step, which stays in its core's cache across the steps; one region per step, since
        every unit's next product reads all of H_t. Not for GRU with linear_before_reset = 0,
        whose candidate's product reads r (.) H_{t-1} of every unit in the middle of the step."""
        threads, nr = k.target.threads, k.target.gemm_nr
        if self.kind == "gru" and not node.attrs.get("linear_before_reset", 0):
            return None
        if threads < 2 or not k.target.prepack or not isinstance(hidden, int) \
                or self.gates * hidden * hidden < SPLIT_MIN_MACS or hidden < 2 * nr:
            return None
        chunk = -(-hidden // threads // nr) * nr
        return {"parts": -(-hidden // chunk), "chunk": chunk, "panels": -(-hidden // nr) * nr}


# A step's product R H_{t-1} (multiply-adds) worth splitting between threads: above this it
# takes about 5 us on one core, several times what handing half of it to another costs.
SPLIT_MIN_MACS = 131072


def num_directions(node: Node, fail) -> int:
    direction = node.attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise fail(f"unknown direction {direction!r}")
    return 2 if direction == "bidirectional" else 1


def activations(node: Node, defaults: tuple[str, ...], dirs: int, fail) -> list[tuple[str, float, float]]:
    """(name, alpha, beta) of every activation, direction by direction, alpha/beta filled in.

    activation_alpha / activation_beta are consumed in order by the activations that take
    them; missing values take the activation's default (as onnxruntime does)."""
    per_dir = len(defaults) // 2
    names = [str(a).lower() for a in node.attrs.get("activations", defaults[:per_dir * dirs])]
    if dirs == 2 and len(names) == per_dir:
        names = names * 2
    elif dirs == 1 and len(names) == 2 * per_dir:  # RNN's schema default lists Tanh twice
        names = names[:per_dir]
    if len(names) != per_dir * dirs:
        raise fail(f"activations must list {per_dir * dirs} functions, got {len(names)}")
    alphas = list(node.attrs.get("activation_alpha", ()))
    betas = list(node.attrs.get("activation_beta", ()))
    out = []
    for name in names:
        if name not in ACTIVATIONS:
            raise fail(f"unsupported activation {name!r}")
        count, alpha, beta = ACTIVATIONS[name]
        if count >= 1 and alphas:
            alpha = alphas.pop(0)
        if count >= 2 and betas:
            beta = betas.pop(0)
        out.append((name, float(alpha), float(beta)))
    return out


def activation_expr(name: str, alpha: float, beta: float, ct: str) -> str:
    """C expression of the activation in compute type ``ct``; ``{0}`` is the operand."""
    f = "" if ct == "double" else "f"
    exp, tanh = cexpr.math_fn("exp", ct), cexpr.math_fn("tanh", ct)
    a, b, one = _literal(alpha, ct), _literal(beta, ct), _literal(1.0, ct)
    return {
        "relu": "({0} > 0 ? {0} : 0)",
        "tanh": f"{tanh}({{0}})",
        "sigmoid": f"({one} / ({one} + {exp}(-{{0}})))",
        "affine": f"({a} * {{0}} + {b})",
        "leakyrelu": f"({{0}} >= 0 ? {{0}} : {a} * {{0}})",
        "thresholdedrelu": f"({{0}} > {a} ? {{0}} : 0)",
        "scaledtanh": f"({a} * {tanh}({b} * {{0}}))",
        "hardsigmoid": f"fmax{f}(0, fmin{f}({one}, {a} * {{0}} + {b}))",
        "elu": f"({{0}} >= 0 ? {{0}} : {a} * ({exp}({{0}}) - {one}))",
        "softsign": f"({{0}} / ({one} + fabs{f}({{0}})))",
        "softplus": f"({{0}} > 0 ? {{0}} + log1p{f}(exp{f}(-{{0}})) : log1p{f}(exp{f}({{0}})))",
    }[name]


def _panel_cols(n):
    """At least the columns of n split in up to two parts (GRU), each rounded up to whole
    column panels of the widest float32 GEMM tile (any build target)."""
    return cexpr.add(n, 2 * _gemm.NR["float"])


def loader(t: TensorRef) -> dict:
    """Template data of a tensor: its name and ``load`` (``{0}`` is the element index)."""
    return {"name": t.name, "load": t.load("{0}"), "store": t.store("{0}"), "ctype": t.ctype}


def _literal(x: float, ct: str) -> str:
    text = repr(float(x))
    return text if ct == "double" else f"{text}f"
