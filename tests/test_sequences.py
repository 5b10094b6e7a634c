"""Sequences and optionals in generated C, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from helpers import run_onnxc, run_ort

rng = np.random.default_rng(3)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def seq_vi(name, t, shape=None):
    return helper.make_tensor_sequence_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def same(actual, expected):
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            same(a, e)
        return
    if expected is None:
        assert actual is None
        return
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-6)


def check(m, feeds):
    expected = run_ort(m, feeds)
    actual = run_onnxc(m, feeds)
    for a, e in zip(actual, expected):
        same(a, e)


def test_construct_insert_erase_at_length():
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "c", "zero"], ["s2"]),       # at the front
        helper.make_node("SequenceInsert", ["s2", "a"], ["s3"]),               # at the end
        helper.make_node("SequenceErase", ["s3", "one"], ["s4"]),
        helper.make_node("SequenceAt", ["s4", "minus_one"], ["last"]),
        helper.make_node("SequenceLength", ["s4"], ["n"]),
    ]
    inits = [helper.make_tensor("zero", TP.INT64, [], [0]), helper.make_tensor("one", TP.INT64, [], [1]),
             helper.make_tensor("minus_one", TP.INT32, [], [-1])]
    m = model(nodes, [vi("a", TP.FLOAT, ["N", 2]), vi("b", TP.FLOAT, ["M", 2]), vi("c", TP.FLOAT, [1, 2])],
              [seq_vi("s4", TP.FLOAT), vi("last", TP.FLOAT, ["p", 2]), vi("n", TP.INT64, [])], inits)
    for n, k in ((3, 1), (2, 5)):
        check(m, {"a": rng.random((n, 2), dtype=np.float32), "b": rng.random((k, 2), dtype=np.float32),
                  "c": rng.random((1, 2), dtype=np.float32)})


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (0, 1), (2, 1), (-1, 0)])
def test_split_then_concat(axis, new_axis):
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    m = model(nodes, [vi("x", TP.FLOAT, [2, 6]), vi("split", TP.INT64, [3])], [vi("y", TP.FLOAT, ["A", "B", "C"][:2 + new_axis])])
    if new_axis:  # stacking needs equal pieces
        split = np.array([2, 2, 2], np.int64)
    else:
        split = np.array([1, 2, 3], np.int64)
    if not new_axis and axis == 0:
        split = np.array([2, 2, 2], np.int64)
    check(m, {"x": rng.random((2, 6), dtype=np.float32), "split": split})


@pytest.mark.parametrize("keepdims", [0, 1])
def test_split_to_sequence_scalar_and_default(keepdims):
    nodes = [helper.make_node("SplitToSequence", ["x", "k"], ["s1"], axis=0),
             helper.make_node("SplitToSequence", ["x"], ["s2"], axis=1, keepdims=keepdims)]
    m = model(nodes, [vi("x", TP.FLOAT, ["N", 3])], [seq_vi("s1", TP.FLOAT), seq_vi("s2", TP.FLOAT)],
              [helper.make_tensor("k", TP.INT64, [], [2])])
    check(m, {"x": rng.random((5, 3), dtype=np.float32)})


def test_sequence_inputs_and_outputs_round_trip():
    m = model([helper.make_node("SequenceInsert", ["s", "x"], ["t"])],
              [seq_vi("s", TP.FLOAT, ["a"]), vi("x", TP.FLOAT, ["b"])], [seq_vi("t", TP.FLOAT)])
    items = [rng.random(k, dtype=np.float32) for k in (1, 4, 2)]
    check(m, {"s": items, "x": rng.random(3, dtype=np.float32)})
    check(m, {"s": [], "x": rng.random(3, dtype=np.float32)})


def test_sequence_map_with_a_tensor_argument():
    body = helper.make_graph([helper.make_node("Add", ["e", "t"], ["r"]), helper.make_node("Shape", ["e"], ["sh"])],
                             "body", [vi("e", TP.FLOAT, ["k"]), vi("t", TP.FLOAT, [1])],
                             [vi("r", TP.FLOAT, ["k"]), vi("sh", TP.INT64, [1])])
    m = model([helper.make_node("SequenceMap", ["s", "t"], ["rs", "shapes"], body=body)],
              [seq_vi("s", TP.FLOAT, ["a"]), vi("t", TP.FLOAT, [1])],
              [seq_vi("rs", TP.FLOAT), seq_vi("shapes", TP.INT64)], opset=17)
    check(m, {"s": [rng.random(k, dtype=np.float32) for k in (3, 1, 5)], "t": rng.random(1, dtype=np.float32)})


def test_optional_wrap_has_get():
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"])]
    m = model(nodes, [vi("x", TP.FLOAT, ["N"])], [vi("has", TP.BOOL, []), vi("y", TP.FLOAT, ["N"])])
    check(m, {"x": rng.random(4, dtype=np.float32)})


def test_optional_graph_input_may_be_empty():
    tp = helper.make_optional_type_proto(helper.make_tensor_type_proto(TP.FLOAT, ["N"]))
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"])]
    m = model(nodes, [helper.make_value_info("o", tp)], [vi("has", TP.BOOL, [])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].type == "optional(tensor(float))"
    assert bool(sess.run(None, {"o": None})[0]) is False
    assert bool(sess.run(None, {})[0]) is False
    assert bool(sess.run(None, {"o": np.ones(2, np.float32)})[0]) is True


def test_empty_optional_get_element_fails_cleanly():
    tp = helper.make_optional_type_proto(helper.make_tensor_type_proto(TP.FLOAT, ["N"]))
    m = model([helper.make_node("OptionalGetElement", ["o"], ["y"])], [helper.make_value_info("o", tp)],
              [vi("y", TP.FLOAT, ["N"])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.RuntimeFailure, match="empty"):
        sess.run(None, {"o": None})


def test_sequence_feed_is_checked():
    m = model([helper.make_node("SequenceLength", ["s"], ["n"])], [seq_vi("s", TP.FLOAT, ["a"])],
              [vi("n", TP.INT64, [])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].type == "seq(tensor(float))"
    assert int(sess.run(None, {"s": [np.ones(2, np.float32)] * 3})[0]) == 3
    with pytest.raises(onnxc.InvalidArgument):
        sess.run(None, {"s": np.ones(2, np.float32)})
    with pytest.raises(onnxc.InvalidArgument):
        sess.run(None, {"s": [np.ones(2, np.int64)]})


def test_loop_builds_a_sequence():
    """A loop-carried sequence grows by one slice per iteration (like onnx's loop13_seq)."""
    body = helper.make_graph([
        helper.make_node("Identity", ["c"], ["c2"]),
        helper.make_node("Add", ["i", "one"], ["end"]),
        helper.make_node("Unsqueeze", ["end", "zero"], ["end1"]),
        helper.make_node("Slice", ["x", "zero", "end1"], ["piece"]),
        helper.make_node("SequenceInsert", ["s", "piece"], ["s2"]),
    ], "body", [vi("i", TP.INT64, []), vi("c", TP.BOOL, []), seq_vi("s", TP.FLOAT)],
        [vi("c2", TP.BOOL, []), seq_vi("s2", TP.FLOAT)],
        [helper.make_tensor("one", TP.INT64, [], [1]), helper.make_tensor("zero", TP.INT64, [1], [0])])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"]),
             helper.make_node("Loop", ["M", "", "empty"], ["out"], body=body)]
    m = model(nodes, [vi("M", TP.INT64, []), vi("x", TP.FLOAT, [5])], [seq_vi("out", TP.FLOAT)])
    check(m, {"M": np.array(4, np.int64), "x": rng.random(5, dtype=np.float32)})
