"""Parallel CUDA kernels of the recurrent ops, Einsum and Det (templates/cuda/recurrent, einsum
and det .cu.j2) on the emulated CUDA build: sizes that take several blocks or more threads than
a block has, results compared with onnxruntime, and the generated source checked to launch each
node in parallel (a block per sequence or matrix, or a grid of threads), not one thread, and to
take the variant meant (shared memory, the scratch of one block, a thread per matrix).
"""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers import random_normal as rand
from helpers import make_inferred_model as build
from helpers import cuda_check as check
from helpers import make_model, run_ort
from onnxc.runtime import cuda
from tools import requires


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def variants(sess, expect: dict[str, str]) -> None:
    """Each node's function in the generated source holds the comment of the variant meant."""
    with open(os.path.join(sess._folder, "model.cu")) as f:
        src = f.read()
    for name, text in expect.items():
        body = re.search(rf"ONNXC_NODE static int node\d+_\w+?_{name}\(.*?\n}}\n", src, re.S)
        assert body is not None, name
        assert text in body.group(0), name


def batch_major_reference(model, feeds):
    """onnxruntime's results for a batch-major (layout 1) recurrent model, which it does not
    run: the sequence-major model on transposed inputs, its outputs transposed back."""
    import onnx
    seq_major = onnx.ModelProto()
    seq_major.CopyFrom(model)
    node = seq_major.graph.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    swap = {"x": (1, 0, 2), "h0": (1, 0, 2), "c0": (1, 0, 2)}
    for v in list(seq_major.graph.input) + list(seq_major.graph.output):
        if v.name == "lens":
            continue
        dims = v.type.tensor_type.shape.dim
        perm = swap.get(v.name) or ((1, 2, 0, 3) if len(dims) == 4 else (1, 0, 2))
        old = [onnx.TensorShapeProto.Dimension() for _ in dims]
        for o, d in zip(old, dims):
            o.CopyFrom(d)
        for i, p in enumerate(perm):
            dims[i].CopyFrom(old[p])
    outs = run_ort(seq_major, {k: (np.ascontiguousarray(v.transpose(swap[k])) if k in swap else v)
                               for k, v in feeds.items()})
    return [np.ascontiguousarray(o.transpose((2, 0, 1, 3)) if o.ndim == 4 else o.transpose(1, 0, 2)) for o in outs]


def init(name, array):
    return numpy_helper.from_array(array, name)


SHARED = "a block per sequence"
ONE_BLOCK = "one block, every sequence in turn"


def lstm_bidirectional():
    """Bidirectional LSTM with biases, sequence_lens, initial states, peepholes and clip; 70 hidden
    units (280 gate rows, more than a block's threads), the batch symbolic."""
    hid, inp, seq = 70, 11, 6
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B", "lens", "h0", "c0", "P"], ["y", "yh", "yc"], name="Bidi",
                              hidden_size=hid, direction="bidirectional", clip=2.5)]
    inits = [init("W", rand(2, 4 * hid, inp, seed=1, scale=0.3)), init("R", rand(2, 4 * hid, hid, seed=2, scale=0.2)),
             init("B", rand(2, 8 * hid, seed=3, scale=0.5)), init("P", rand(2, 3 * hid, seed=4, scale=0.5))]
    model = build(nodes, [("x", TP.FLOAT, [seq, "N", inp]), ("lens", TP.INT32, ["N"]), ("h0", TP.FLOAT, [2, "N", hid]),
                          ("c0", TP.FLOAT, [2, "N", hid])],
                  [("y", TP.FLOAT, [seq, 2, "N", hid]), ("yh", TP.FLOAT, [2, "N", hid]), ("yc", TP.FLOAT, [2, "N", hid])],
                  inits, opset=14)
    return model, lambda n, seed: {"x": rand(seq, n, inp, seed=seed), "h0": rand(2, n, hid, seed=seed + 1),
                                   "c0": rand(2, n, hid, seed=seed + 2)}


def lstm_batch_major():
    """Batch-major (layout 1) LSTM in reverse with input_forget and other activations."""
    hid, inp, seq = 20, 11, 6
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh", "yc"], name="Batchwise", hidden_size=hid,
                              layout=1, direction="reverse", input_forget=1,
                              activations=["HardSigmoid", "Tanh", "Softsign"], activation_alpha=[0.3],
                              activation_beta=[0.4])]
    inits = [init("W", rand(1, 4 * hid, inp, seed=11, scale=0.3)), init("R", rand(1, 4 * hid, hid, seed=12, scale=0.3)),
             init("B", rand(1, 8 * hid, seed=13, scale=0.5))]
    model = build(nodes, [("x", TP.FLOAT, ["N", seq, inp])],
                  [("y", TP.FLOAT, ["N", seq, 1, hid]), ("yh", TP.FLOAT, ["N", 1, hid]), ("yc", TP.FLOAT, ["N", 1, hid])],
                  inits, opset=14)
    return model, {"x": rand(4, seq, inp, seed=14)}


GRU_VARIANTS = {"Bidi": ({"direction": "bidirectional", "linear_before_reset": 0}, TP.FLOAT),
                "LinearBeforeReset": ({"direction": "reverse", "linear_before_reset": 1, "clip": 1.5, "layout": 1},
                                      TP.FLOAT),
                "Double": ({"direction": "forward", "linear_before_reset": 1}, TP.DOUBLE)}


def gru(name):
    """GRU with biases, sequence_lens and an initial state; 90 hidden units."""
    attrs, elem = GRU_VARIANTS[name]
    hid, inp, seq, n = 90, 7, 5, 3
    dtype = np.float64 if elem == TP.DOUBLE else np.float32
    dirs = 2 if attrs["direction"] == "bidirectional" else 1
    nodes = [helper.make_node("GRU", ["x", "W", "R", "B", "lens", "h0"], ["y", "yh"], name=name, hidden_size=hid,
                              **attrs)]
    inits = [init("W", rand(dirs, 3 * hid, inp, seed=1, scale=0.3, dtype=dtype)),
             init("R", rand(dirs, 3 * hid, hid, seed=2, scale=0.2, dtype=dtype)),
             init("B", rand(dirs, 6 * hid, seed=3, scale=0.5, dtype=dtype))]
    x_shape, state, y_shape = ((["N", seq, inp], ["N", dirs, hid], ["N", seq, dirs, hid]) if attrs.get("layout") else
                               ([seq, "N", inp], [dirs, "N", hid], [seq, dirs, "N", hid]))
    model = build(nodes, [("x", elem, x_shape), ("lens", TP.INT32, ["N"]), ("h0", elem, state)],
                  [("y", elem, y_shape), ("yh", elem, state)], inits, opset=14)
    feeds = {"x": rand(*[n if d == "N" else d for d in x_shape], seed=4, dtype=dtype),
             "lens": np.array([5, 2, 1], np.int32), "h0": rand(*[n if d == "N" else d for d in state], seed=5, dtype=dtype)}
    return model, feeds


def rnn():
    """RNN with Relu / LeakyRelu (alpha) per direction, biases, clip and an initial state, and a
    forward RNN with only Y_h asked for; 300 hidden units."""
    hid, inp, seq = 300, 9, 4
    nodes = [helper.make_node("RNN", ["x", "W", "R", "B", "", "h0"], ["y", "yh"], name="Bidi", hidden_size=hid,
                              direction="bidirectional", activations=["Relu", "LeakyRelu"], activation_alpha=[0.2],
                              clip=3.0),
             helper.make_node("RNN", ["x", "W1", "R1"], ["", "yh1"], name="Forward", hidden_size=hid)]
    inits = [init("W", rand(2, hid, inp, seed=1, scale=0.3)), init("R", rand(2, hid, hid, seed=2, scale=0.05)),
             init("B", rand(2, 2 * hid, seed=3, scale=0.5)), init("W1", rand(1, hid, inp, seed=4, scale=0.3)),
             init("R1", rand(1, hid, hid, seed=5, scale=0.05))]
    model = build(nodes, [("x", TP.FLOAT, [seq, "N", inp]), ("h0", TP.FLOAT, [2, "N", hid])],
                  [("y", TP.FLOAT, [seq, 2, "N", hid]), ("yh", TP.FLOAT, [2, "N", hid]), ("yh1", TP.FLOAT, [1, "N", hid])],
                  inits, opset=14)
    return model, {"x": rand(seq, 2, inp, seed=6), "h0": rand(2, 2, hid, seed=7)}


def recurrent_symbolic(op, hid=80):
    """Bidirectional LSTM / GRU whose W, R and B are inputs of symbolic dims (the hidden size
    known only at run time), with sequence_lens."""
    inp, seq, batch = 5, 3, 2
    gates = 4 if op == "LSTM" else 3
    nodes = [helper.make_node(op, ["x", "W", "R", "B", "lens"], ["y", "yh"], name="Sym", direction="bidirectional")]
    model = make_model(nodes, [("x", TP.FLOAT, [seq, "N", inp]), ("W", TP.FLOAT, [2, "G", inp]),
                               ("R", TP.FLOAT, [2, "G", "H"]), ("B", TP.FLOAT, [2, "G2"]), ("lens", TP.INT32, ["N"])],
                       [("y", TP.FLOAT, [seq, 2, "N", "H"]), ("yh", TP.FLOAT, [2, "N", "H"])], opset=14)
    ort_model = onnx.ModelProto()
    ort_model.CopyFrom(model)
    ort_model.graph.node[0].attribute.append(helper.make_attribute("hidden_size", hid))  # onnxruntime needs it
    feeds = {"x": rand(seq, batch, inp, seed=1), "W": rand(2, gates * hid, inp, seed=2, scale=0.3),
             "R": rand(2, gates * hid, hid, seed=3, scale=0.2), "B": rand(2, 2 * gates * hid, seed=4, scale=0.5),
             "lens": np.array([3, 2], np.int32)}
    return model, ort_model, feeds


def lstm_big():
    """A hidden size known when compiling whose gates and state do not fit in shared memory."""
    hid, inp, seq = 1400, 3, 2
    nodes = [helper.make_node("LSTM", ["x", "W", "R"], ["y", "yh", "yc"], name="Big", hidden_size=hid)]
    inits = [init("W", rand(1, 4 * hid, inp, seed=1, scale=0.3)), init("R", rand(1, 4 * hid, hid, seed=2, scale=0.02))]
    model = build(nodes, [("x", TP.FLOAT, [seq, 2, inp])],
                  [("y", TP.FLOAT, [seq, 1, 2, hid]), ("yh", TP.FLOAT, [1, 2, hid]), ("yc", TP.FLOAT, [1, 2, hid])],
                  inits, opset=14)
    return model, {"x": rand(seq, 2, inp, seed=3)}


def einsum():
    """Batched matmul (a symbolic batch), a diagonal with ellipses that broadcast, an implicit
    output, int32, and scalar outputs."""
    nodes = [helper.make_node("Einsum", ["a", "b"], ["mm"], name="MatMul", equation="bij,bjk->bik"),
             helper.make_node("Einsum", ["d", "e"], ["diag"], name="Diagonal", equation="...ii,...i->...i"),
             helper.make_node("Einsum", ["a"], ["impl"], name="Implicit", equation="bji"),
             helper.make_node("Einsum", ["p", "q"], ["pq"], name="Int32", equation="ij,jk->ki"),
             helper.make_node("Einsum", ["a", "a"], ["dot"], name="Dot", equation="bij,bij->"),
             helper.make_node("Einsum", ["t"], ["trace"], name="Trace", equation="ii->")]
    model = build(nodes, [("a", TP.FLOAT, ["N", 17, 23]), ("b", TP.FLOAT, ["N", 23, 19]), ("d", TP.FLOAT, [4, 1, 30, 30]),
                          ("e", TP.FLOAT, [1, 3, 30]), ("t", TP.FLOAT, [300, 300]), ("p", TP.INT32, [21, 15]),
                          ("q", TP.INT32, [15, 26])],
                  [("mm", TP.FLOAT, None), ("diag", TP.FLOAT, [4, 3, 30]), ("impl", TP.FLOAT, None), ("pq", TP.INT32, None),
                   ("dot", TP.FLOAT, None), ("trace", TP.FLOAT, None)], opset=18)
    rng = np.random.default_rng(0)
    feeds = {"a": rand(3, 17, 23, seed=1), "b": rand(3, 23, 19, seed=2), "d": rand(4, 1, 30, 30, seed=3),
             "e": rand(1, 3, 30, seed=4), "t": rand(300, 300, seed=5),
             "p": rng.integers(-50, 50, (21, 15)).astype(np.int32), "q": rng.integers(-50, 50, (15, 26)).astype(np.int32)}
    return model, feeds


def det():
    """3 x 3 matrices (the batch symbolic), 20 x 20 with a singular one and one whose pivots need
    row swaps, 60 x 60, and matrices of a symbolic size."""
    nodes = [helper.make_node("Det", ["s"], ["ds"], name="Small"), helper.make_node("Det", ["m"], ["dm"], name="Medium"),
             helper.make_node("Det", ["l"], ["dl"], name="Large"), helper.make_node("Det", ["v"], ["dv"], name="Sym")]
    model = build(nodes, [("s", TP.FLOAT, ["N", 3, 3]), ("m", TP.FLOAT, [2, 3, 20, 20]), ("l", TP.FLOAT, [2, 60, 60]),
                          ("v", TP.FLOAT, [3, "K", "K"])],
                  [("ds", TP.FLOAT, ["N"]), ("dm", TP.FLOAT, [2, 3]), ("dl", TP.FLOAT, [2]), ("dv", TP.FLOAT, [3])],
                  opset=18)
    m = rand(2, 3, 20, 20, seed=2)
    m[0, 1, :, 4] = 0.0                      # singular
    m[1, 2] = np.triu(m[1, 2], 1) + np.tril(np.ones((20, 20), np.float32) * 0.5, -1)   # zero diagonal
    feeds = {"s": rand(300, 3, 3, seed=1), "m": m, "l": rand(2, 60, 60, seed=3, scale=0.4), "v": rand(3, 12, 12, seed=4)}
    return model, feeds


def test_lstm_takes_a_block_per_sequence():
    """A block per (direction, batch entry) with the gates and state in shared memory; a
    sequence_lens value out of range fails the run."""
    model, make_feeds = lstm_bidirectional()
    feeds = {**make_feeds(3, 5), "lens": np.array([6, 1, 4], np.int32)}
    sess = check(model, feeds, {"Bidi": "block"}, rtol=1e-4, atol=1e-5)
    variants(sess, {"Bidi": SHARED})
    with pytest.raises(Exception, match="LSTM: sequence_lens value out of range"):
        sess.run(None, {**feeds, "lens": np.array([6, 7, 4], np.int32)})
    check(model, {**make_feeds(5, 8), "lens": np.array([1, 6, 3, 2, 5], np.int32)}, {}, sess=sess,
          rtol=1e-4, atol=1e-5)
    model, feeds = lstm_batch_major()
    sess = check(model, feeds, {"Batchwise": "block"}, rtol=1e-4, atol=1e-5, want=batch_major_reference(model, feeds))
    variants(sess, {"Batchwise": SHARED})


@pytest.mark.parametrize("name", list(GRU_VARIANTS))
def test_gru_takes_a_block_per_sequence(name):
    """Without linear_before_reset (r (.) H_t between barriers) bidirectional, with it batch-major
    in reverse with clip, and in double."""
    model, feeds = gru(name)
    layout = GRU_VARIANTS[name][0].get("layout")
    if name == "Double":
        # (onnxruntime has no double GRU: ONNX's reference, which ignores sequence_lens, on full lengths)
        feeds["lens"] = np.full_like(feeds["lens"], feeds["x"].shape[0])
        sess = check(model, feeds, {name: "block"}, rtol=1e-10, atol=1e-12,
                     want=ReferenceEvaluator(model).run(None, feeds))
    else:
        sess = check(model, feeds, {name: "block"}, rtol=1e-4, atol=1e-5,
                     want=batch_major_reference(model, feeds) if layout else None)
    variants(sess, {name: SHARED})


def test_rnn_takes_a_block_per_sequence():
    model, feeds = rnn()
    sess = check(model, feeds, {"Bidi": "block", "Forward": "block"}, rtol=1e-4, atol=1e-5)
    variants(sess, {"Bidi": SHARED, "Forward": SHARED})


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_recurrent_of_a_symbolic_hidden_size_takes_one_block(op):
    """The hidden size known only at run time: one block takes every (direction, batch entry)
    sequence in turn, in the C build's scratch."""
    model, ort_model, feeds = recurrent_symbolic(op)
    sess = check(model, feeds, {"Sym": "block"}, rtol=1e-4, atol=1e-5, ort_model=ort_model)
    variants(sess, {"Sym": ONE_BLOCK})


def test_lstm_too_big_for_shared_memory_takes_one_block():
    model, feeds = lstm_big()
    sess = check(model, feeds, {"Big": "block"}, rtol=1e-4, atol=1e-5)
    variants(sess, {"Big": ONE_BLOCK})


def test_einsum_takes_a_thread_per_output():
    """A thread per output element (a grid); a scalar output: one block merges the sum."""
    model, feeds = einsum()
    sess = check(model, feeds, {"MatMul": "grid", "Diagonal": "grid", "Implicit": "grid", "Int32": "grid",
                                "Dot": "block", "Trace": "block"}, rtol=1e-5, atol=1e-4)
    variants(sess, {"MatMul": "a thread per output element", "Dot": "one block"})


def test_det_takes_a_thread_or_a_block_per_matrix():
    """A thread per small matrix, a block per matrix that fits in shared memory, else one block
    in the scratch (60 x 60, and a symbolic size, run with two sizes)."""
    model, feeds = det()
    sess = check(model, feeds, {"Small": "grid", "Medium": "block", "Large": "block", "Sym": "block"},
                 rtol=1e-4, atol=1e-5)
    variants(sess, {"Small": "a thread per matrix", "Medium": "a block per matrix", "Large": "one block, every matrix",
                    "Sym": "one block, every matrix"})
    check(model, {**feeds, "s": rand(2, 3, 3, seed=5), "v": rand(3, 40, 40, seed=6, scale=0.5)}, {}, sess=sess,
          rtol=1e-4, atol=1e-5)


def _has_nvcc() -> bool:
    from onnxc.codegen.toolchain import _nvcc
    return os.path.isfile(_nvcc()) or shutil.which(_nvcc()) is not None


@requires(_has_nvcc(), "needs nvcc (the CUDA toolkit)")
def test_every_variant_compiles_with_nvcc(tmp_path):
    """The CUDA source of the models above (every variant of the three templates) compiles with
    nvcc, warnings as errors."""
    from conformance.cuda import nvcc_compile
    from onnxc.driver import CompileOptions, generate_source
    models = [lstm_bidirectional()[0], lstm_batch_major()[0], rnn()[0], lstm_big()[0], einsum()[0], det()[0],
              recurrent_symbolic("LSTM")[0], recurrent_symbolic("GRU")[0]] + [gru(name)[0] for name in GRU_VARIANTS]
    sources = [generate_source(m, CompileOptions(target="cuda", prefix=f"m{i}"), command="onnxc compile").source
               for i, m in enumerate(models)]
    nvcc_compile(sources, str(tmp_path))
