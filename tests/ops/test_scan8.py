"""Scan opset 8 (batch axis, optional sequence_lens) against onnxruntime."""
import numpy as np
import pytest
from helpers import assert_matches_ort, make_model, run_ort
from onnx import TensorProto, helper

import onnxc

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(3)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def sum_body(inner):
    """state, x -> state + x, [state + x, x * 2] (two scan outputs, one per input slice)."""
    nodes = [helper.make_node("Add", ["s_in", "x_in"], ["s_out"]),
             helper.make_node("Identity", ["s_out"], ["acc"]),
             helper.make_node("Add", ["x_in", "x_in"], ["dbl"])]
    return helper.make_graph(nodes, "body", [vi("s_in", F, inner), vi("x_in", F, inner)],
                             [vi("s_out", F, inner), vi("acc", F, inner), vi("dbl", F, inner)])


def scan8_model(batch, seq, inner, lens=False, directions=None):
    attrs = {"num_scan_inputs": 1, "body": sum_body(inner)}
    if directions is not None:
        attrs["directions"] = directions
    node = helper.make_node("Scan", ["L" if lens else "", "S", "X"], ["S_final", "ACC", "DBL"], **attrs)
    inputs = ([("L", I64, [batch])] if lens else []) + [("S", F, [batch] + inner), ("X", F, [batch, seq] + inner)]
    outputs = [("S_final", F, [batch] + inner), ("ACC", F, [batch, seq] + inner), ("DBL", F, [batch, seq] + inner)]
    return make_model([node], inputs, outputs, opset=8)


def feeds(batch, seq, inner, lens=None):
    f = {"S": rng.standard_normal([batch] + inner).astype(np.float32),
         "X": rng.standard_normal([batch, seq] + inner).astype(np.float32)}
    if lens is not None:
        f["L"] = np.array(lens, dtype=np.int64)
    return f


@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("batch, seq, inner", [(1, 3, [2]), (3, 4, [2, 3]), (2, 1, [])])
def test_scan8_full_sequences(batch, seq, inner, reverse):
    assert_matches_ort(scan8_model(batch, seq, inner, directions=[reverse]), feeds(batch, seq, inner))


@pytest.mark.parametrize("reverse", [0, 1])
def test_scan8_sequence_lens(reverse):
    """Shorter sequences: the states stop early; the scan outputs past the length are zero here
    (the spec leaves them undefined), so only the defined part is compared."""
    batch, seq, inner, lens = 3, 4, [2], [4, 2, 1]
    m = scan8_model(batch, seq, inner, lens=True, directions=[reverse])
    f = feeds(batch, seq, inner, lens)
    expected = run_ort(m, f)
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, f)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6)
    for a, e in zip(actual[1:], expected[1:]):
        assert a.shape == e.shape
        for b, n in enumerate(lens):
            np.testing.assert_allclose(a[b, :n], e[b, :n], rtol=1e-6)
            np.testing.assert_array_equal(a[b, n:], 0)


def test_scan8_zero_length_sequence():
    """onnxruntime rejects a zero sequence length; the spec runs no iteration for that entry."""
    m = scan8_model(2, 3, [2], lens=True)
    f = feeds(2, 3, [2], [0, 3])
    final, acc, dbl = onnxc.InferenceSession(m.SerializeToString()).run(None, f)
    np.testing.assert_array_equal(final[0], f["S"][0])
    np.testing.assert_allclose(final[1], f["S"][1] + f["X"][1].sum(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(acc[0], 0)
    np.testing.assert_allclose(acc[1], f["S"][1] + np.cumsum(f["X"][1], axis=0), rtol=1e-5)
    np.testing.assert_allclose(dbl[1], 2 * f["X"][1], rtol=1e-6)


def test_scan8_symbolic_batch_and_sequence():
    m = scan8_model("B", "T", [2])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for batch, seq in ((2, 5), (1, 1)):
        f = feeds(batch, seq, [2])
        for a, e in zip(sess.run(None, f), run_ort(m, f)):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-6)
    # No iteration at all (onnxruntime leaves the final state uninitialized here).
    f = feeds(3, 0, [2])
    final, acc, dbl = sess.run(None, f)
    np.testing.assert_array_equal(final, f["S"])
    assert acc.shape == dbl.shape == (3, 0, 2)


def test_scan8_sequence_len_out_of_range():
    m = scan8_model(2, 3, [2], lens=True)
    with pytest.raises(onnxc.RuntimeFailure):
        onnxc.InferenceSession(m.SerializeToString()).run(None, feeds(2, 3, [2], [1, 4]))


def test_scan8_two_scan_inputs_and_an_outer_value():
    """The same input scanned both ways (a bidirectional scan) and a body reading an enclosing
    value (W) directly."""
    inner = [3]
    nodes = [helper.make_node("Mul", ["s_in", "W"], ["sw"]),
             helper.make_node("Add", ["sw", "f_in"], ["s_out"]),
             helper.make_node("Sub", ["f_in", "b_in"], ["diff"])]
    body = helper.make_graph(nodes, "body", [vi("s_in", F, inner), vi("f_in", F, inner), vi("b_in", F, inner)],
                             [vi("s_out", F, inner), vi("diff", F, inner)])
    node = helper.make_node("Scan", ["", "S", "X", "X"], ["S_final", "D"], num_scan_inputs=2,
                            directions=[0, 1], body=body)
    m = make_model([node], [("S", F, ["B"] + inner), ("X", F, ["B", 5] + inner), ("W", F, inner)],
                   [("S_final", F, ["B"] + inner), ("D", F, ["B", 5] + inner)], opset=8)
    f = feeds(2, 5, inner)
    f["W"] = rng.uniform(0.5, 1.0, inner).astype(np.float32)
    assert_matches_ort(m, f)
