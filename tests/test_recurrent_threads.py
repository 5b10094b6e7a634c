"""LSTM, GRU and RNN steps split between threads (templates/c/recurrent.c.j2, float32 path):
above compiler/ops/_recurrent.SPLIT_MIN_MACS each thread takes a range of hidden units of every
gate at each step, its products with H_{t-1} and their cell update. The results must be the
same bits as one thread's (each unit's sums run in the same order) and match onnxruntime, for
hidden sizes that do and do not fill whole column panels, both directions, batches with
sequence_lens, initial states, peepholes and clip."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort

SPLIT = "Each part: units [j0, j1) of every gate"


def _model(op: str, hidden: int, inputs: int, seq: int, batch: int, *, lens=False, states=False, peep=False,
           clip=None, lbr=0, direction="bidirectional", seed=0):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(hidden)
    inits = [numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, inputs)) * scale).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, hidden)) * scale).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((dirs, 2 * gates * hidden)) * 0.1).astype(np.float32), "B")]
    names = ["x", "W", "R", "B", "", "", ""]
    graph_inputs = [("x", T.FLOAT, [seq, batch, inputs])]
    if lens:
        names[4] = "lens"
        graph_inputs.append(("lens", T.INT32, [batch]))
    if states:
        names[5] = "h0"
        graph_inputs.append(("h0", T.FLOAT, [dirs, batch, hidden]))
        if op == "LSTM":
            names[6] = "c0"
            graph_inputs.append(("c0", T.FLOAT, [dirs, batch, hidden]))
    if peep:
        names.append("P")
        inits.append(numpy_helper.from_array((rng.standard_normal((dirs, 3 * hidden)) * 0.1).astype(np.float32), "P"))
    while names and names[-1] == "":
        names.pop()
    attrs = {"hidden_size": hidden, "direction": direction}
    if clip is not None:
        attrs["clip"] = clip
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, name="Steps", **attrs)
    shapes = {"y": [seq, dirs, batch, hidden], "yh": [dirs, batch, hidden], "yc": [dirs, batch, hidden]}
    model = make_model([node], graph_inputs, [(o, T.FLOAT, shapes[o]) for o in outs], inits)
    feeds = {"x": rng.standard_normal((seq, batch, inputs)).astype(np.float32)}
    if lens:
        feeds["lens"] = rng.integers(1, seq + 1, size=batch).astype(np.int32)
        feeds["lens"][0] = seq
    if states:
        feeds["h0"] = (rng.standard_normal((dirs, batch, hidden)) * 0.5).astype(np.float32)
        if op == "LSTM":
            feeds["c0"] = (rng.standard_normal((dirs, batch, hidden)) * 0.5).astype(np.float32)
    return model, feeds


def _run(model, feeds, threads):
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    with open(os.path.join(sess.artifact_dir, "model.c")) as f:
        source = f.read()
    return sess.run(None, feeds), source


CASES = {
    # hidden a whole number of panels (every build's panel width divides 256)
    "lstm_256": dict(op="LSTM", hidden=256, inputs=64, seq=7, batch=1),
    # hidden that ends in a part of a panel, batches of unequal lengths, initial states, peepholes, clip
    "lstm_200_everything": dict(op="LSTM", hidden=200, inputs=48, seq=6, batch=3, lens=True, states=True,
                                peep=True, clip=2.5),
    "lstm_reverse": dict(op="LSTM", hidden=216, inputs=40, seq=5, batch=2, direction="reverse", lens=True),
    "gru_linear_before_reset": dict(op="GRU", hidden=232, inputs=50, seq=6, batch=2, lbr=1, lens=True, states=True),
    "rnn_384": dict(op="RNN", hidden=384, inputs=30, seq=5, batch=2, states=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_threads_split_the_units_and_match_one_thread_bit_for_bit(case):
    model, feeds = _model(**CASES[case])
    one, one_src = _run(model, feeds, 1)
    two, two_src = _run(model, feeds, 2)
    assert SPLIT not in one_src
    assert SPLIT in two_src, "the steps of this size are split between the threads"
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    for a, r in zip(two, run_ort(model, feeds)):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5)


def test_gru_resetting_before_its_product_stays_on_one_thread():
    """With linear_before_reset = 0 the candidate's product reads r (.) H_{t-1} of every unit
    in the middle of the step; that case keeps the one-thread steps (and still matches)."""
    model, feeds = _model("GRU", 256, 40, 5, 2, lbr=0)
    two, src = _run(model, feeds, 2)
    assert SPLIT not in src
    for a, r in zip(two, run_ort(model, feeds)):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5)


def test_small_steps_stay_on_one_thread():
    """64 hidden units: a step's product is less work than handing half of it to a thread."""
    model, feeds = _model("LSTM", 64, 16, 4, 1)
    two, src = _run(model, feeds, 2)
    assert SPLIT not in src and "onnxc_sgemv_packed_b(1, (4 * hidden_size), hidden_size, h," in src
    for a, r in zip(two, run_ort(model, feeds)):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5)
