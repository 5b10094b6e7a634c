"""If, Loop and Scan compiled to C: bodies are functions, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_matches_ort, run_onnxc
from onnx import TensorProto as TP
from onnx import helper
from onnxc.compiler.frontend import import_model
from onnxc.compiler.passes.pipeline import run_pipeline

import onnxc

rng = np.random.default_rng(7)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def if_model():
    """The branches give different shapes: x + y (N, 3) or concat(x, x) (2N, 3)."""
    then = helper.make_graph([helper.make_node("Add", ["x", "y"], ["r"])], "then", [], [vi("r", TP.FLOAT, ["a", 3])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["r2"], axis=0)], "else", [],
                              [vi("r2", TP.FLOAT, ["b", 3])])
    return model([helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other)],
                 [vi("c", TP.BOOL, []), vi("x", TP.FLOAT, ["N", 3]), vi("y", TP.FLOAT, [1, 3])],
                 [vi("o", TP.FLOAT, ["M", 3])])


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("n", [2, 5])
def test_if_branches_with_different_shapes(cond, n):
    assert_matches_ort(if_model(), {"c": np.array(cond), "x": rng.random((n, 3), dtype=np.float32),
                                    "y": rng.random((1, 3), dtype=np.float32)})


def test_if_on_a_constant_is_inlined():
    """A condition known at compile time leaves only the branch taken (the other would not
    even type-check here: it reads a rank the input does not have)."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["r"])], "then", [], [vi("r", TP.FLOAT, [3])])
    other = helper.make_graph([helper.make_node("Transpose", ["x"], ["r2"], perm=[1, 0])], "else", [],
                              [vi("r2", TP.FLOAT, [3])])
    m = model([helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other)],
              [vi("x", TP.FLOAT, [3])], [vi("o", TP.FLOAT, [3])],
              [helper.make_tensor("c", TP.BOOL, [], [True])])
    x = rng.random(3, dtype=np.float32)
    np.testing.assert_array_equal(run_onnxc(m, {"x": x})[0], -x)
    _, graph = import_model(m)
    run_pipeline(graph, check=True)
    assert [n.op_type for n in graph.nodes] == ["Neg"]


def nested_if_model():
    """An If inside an If's branch; the inner one reads a value two levels up."""
    inner_then = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["p"])], "it", [], [vi("p", TP.FLOAT, ["N"])])
    inner_else = helper.make_graph([helper.make_node("Sub", ["x", "x"], ["q"])], "ie", [], [vi("q", TP.FLOAT, ["N"])])
    then = helper.make_graph([helper.make_node("If", ["c2"], ["r"], then_branch=inner_then, else_branch=inner_else)],
                             "then", [], [vi("r", TP.FLOAT, ["N"])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["r2"])], "else", [], [vi("r2", TP.FLOAT, ["N"])])
    return model([helper.make_node("If", ["c1"], ["o"], then_branch=then, else_branch=other)],
                 [vi("c1", TP.BOOL, []), vi("c2", TP.BOOL, []), vi("x", TP.FLOAT, ["N"])], [vi("o", TP.FLOAT, ["N"])])


@pytest.mark.parametrize("c1,c2", [(True, True), (True, False), (False, True)])
def test_nested_if_reads_outer_scope(c1, c2):
    assert_matches_ort(nested_if_model(), {"c1": np.array(c1), "c2": np.array(c2),
                                           "x": rng.random(4, dtype=np.float32)})


def loop_model():
    """State that keeps its shape (acc), state that grows (s), a scan output, an early exit."""
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Add", ["acc", "xi"], ["acc2"]),
        helper.make_node("Unsqueeze", ["fi", "zero"], ["fi1"]),
        helper.make_node("Concat", ["s", "fi1"], ["s2"], axis=0),
        helper.make_node("Less", ["fi", "lim"], ["c2"]),
        helper.make_node("Identity", ["acc2"], ["scan_o"]),
    ], "body",
        [vi("i", TP.INT64, []), vi("c", TP.BOOL, []), vi("acc", TP.FLOAT, None), vi("s", TP.FLOAT, None)],
        [vi("c2", TP.BOOL, []), vi("acc2", TP.FLOAT, None), vi("s2", TP.FLOAT, None), vi("scan_o", TP.FLOAT, None)],
        [helper.make_tensor("zero", TP.INT64, [1], [0])])
    return model([helper.make_node("Loop", ["M", "", "acc0", "s0"], ["accf", "sf", "scans"], body=body)],
                 [vi("M", TP.INT64, []), vi("x", TP.FLOAT, ["N", 3]), vi("acc0", TP.FLOAT, ["N", 3]),
                  vi("s0", TP.FLOAT, [2]), vi("lim", TP.FLOAT, [])],
                 [vi("accf", TP.FLOAT, ["N", 3]), vi("sf", TP.FLOAT, ["K"]), vi("scans", TP.FLOAT, ["T", "N", 3])])


@pytest.mark.parametrize("trips,limit", [(3, 10.0), (6, 2.5), (1, 0.0)])
@pytest.mark.parametrize("n", [2, 5])
def test_loop_state_that_grows_and_scan_outputs(trips, limit, n):
    feeds = {"M": np.array(trips, dtype=np.int64), "x": rng.random((n, 3), dtype=np.float32),
             "acc0": rng.random((n, 3), dtype=np.float32), "s0": rng.random(2, dtype=np.float32),
             "lim": np.array(limit, np.float32)}
    assert_matches_ort(loop_model(), feeds)


def test_loop_with_zero_iterations_keeps_the_rank():
    """No iteration ran: final state is the initial value; the scan output is empty with the
    rank the graph declares (onnxruntime returns shape (0,) when the body declares no shape)."""
    feeds = {"M": np.array(0, dtype=np.int64), "x": rng.random((2, 3), dtype=np.float32),
             "acc0": rng.random((2, 3), dtype=np.float32), "s0": rng.random(2, dtype=np.float32),
             "lim": np.array(1.0, np.float32)}
    accf, sf, scans = run_onnxc(loop_model(), feeds)
    np.testing.assert_array_equal(accf, feeds["acc0"])
    np.testing.assert_array_equal(sf, feeds["s0"])
    assert scans.shape == (0, 2, 3)


def scan_model(axis=0, reverse=0, out_axis=0):
    """Cumulative sum over a scan axis, with a second scan output and a captured bias."""
    body = helper.make_graph([
        helper.make_node("Add", ["sum_in", "xs"], ["sum_out"]),
        helper.make_node("Add", ["sum_out", "bias"], ["y"]),
    ], "body", [vi("sum_in", TP.FLOAT, [4]), vi("xs", TP.FLOAT, [4])],
        [vi("sum_out", TP.FLOAT, [4]), vi("y", TP.FLOAT, [4])])
    node = helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[axis], scan_input_directions=[reverse], scan_output_axes=[out_axis])
    xshape = ["T", 4] if axis == 0 else [4, "T"]
    return model([node], [vi("init", TP.FLOAT, [4]), vi("x", TP.FLOAT, xshape), vi("bias", TP.FLOAT, [4])],
                 [vi("final", TP.FLOAT, [4]), vi("ys", TP.FLOAT, ["A", "B"])], opset=16)


@pytest.mark.parametrize("axis,reverse,out_axis", [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 1), (0, 0, -1)])
@pytest.mark.parametrize("t", [1, 5])
def test_scan_axes_and_directions(axis, reverse, out_axis, t):
    x = rng.random((t, 4) if axis == 0 else (4, t), dtype=np.float32)
    assert_matches_ort(scan_model(axis, reverse, out_axis), {"init": rng.random(4, dtype=np.float32), "x": x,
                                                             "bias": rng.random(4, dtype=np.float32)})


def test_body_failure_is_reported_and_does_not_leak():
    """A shape error inside a body comes back as a Python exception naming it."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"])],
                             "body", [vi("i", TP.INT64, []), vi("c", TP.BOOL, []), vi("s", TP.FLOAT, ["K"])],
                             [vi("c2", TP.BOOL, []), vi("s2", TP.FLOAT, ["K"])])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["sf"], body=body)],
              [vi("M", TP.INT64, []), vi("s0", TP.FLOAT, ["K"]), vi("x", TP.FLOAT, ["J"])], [vi("sf", TP.FLOAT, ["K"])])
    sess = onnxc.InferenceSession(m.SerializeToString())
    ok = sess.run(None, {"M": np.array(2, np.int64), "s0": np.ones(3, np.float32), "x": np.ones(3, np.float32)})[0]
    np.testing.assert_array_equal(ok, np.full(3, 3, np.float32))
    with pytest.raises(onnxc.RuntimeFailure, match="dims"):
        sess.run(None, {"M": np.array(2, np.int64), "s0": np.ones(3, np.float32), "x": np.ones(4, np.float32)})


def test_info_lists_ops_inside_bodies():
    from onnxc.compiler.frontend import check_supported, opset_map
    body = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["r"])], "then", [], [vi("r", TP.FLOAT, [3])])
    m = model([helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=body)],
              [vi("c", TP.BOOL, []), vi("x", TP.FLOAT, [3])], [vi("o", TP.FLOAT, [3])])
    with pytest.raises(onnxc.UnsupportedError, match="NoSuchOp"):
        check_supported(m, opset_map(m))


def test_cli_info_on_a_model_marks_unsupported_ops(tmp_path, capsys):
    from onnxc.cli import main
    m = loop_model()
    m.graph.node[0].attribute[0].g.node.append(helper.make_node("NoSuchOp", ["x"], ["unused"]))
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    assert main(["info", str(path)]) == 2
    out = capsys.readouterr().out
    assert "ai.onnx::Loop (opset 17): 1 node(s)  ok" in out
    assert "ai.onnx::NoSuchOp (opset 17): 1 node(s)  NOT SUPPORTED" in out
    path.write_bytes(loop_model().SerializeToString())
    assert main(["info", str(path)]) == 0
    assert "every operator is supported" in capsys.readouterr().out


def test_if_inside_a_loop_reads_state_and_outer_values():
    """Each iteration branches on the iteration number; the branches read the loop state
    (a value of the body) and x (a value two graphs up)."""
    then = helper.make_graph([helper.make_node("Add", ["s", "x"], ["r"])], "then", [], [vi("r", TP.FLOAT, ["N"])])
    other = helper.make_graph([helper.make_node("Mul", ["s", "x"], ["r2"])], "else", [], [vi("r2", TP.FLOAT, ["N"])])
    body = helper.make_graph([
        helper.make_node("Mod", ["i", "two"], ["m"]),
        helper.make_node("Equal", ["m", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["s2"], then_branch=then, else_branch=other),
        helper.make_node("Identity", ["c"], ["c2"]),
        helper.make_node("ReduceSum", ["s2"], ["total"], keepdims=0),
    ], "body", [vi("i", TP.INT64, []), vi("c", TP.BOOL, []), vi("s", TP.FLOAT, ["N"])],
        [vi("c2", TP.BOOL, []), vi("s2", TP.FLOAT, ["N"]), vi("total", TP.FLOAT, [])],
        [helper.make_tensor("two", TP.INT64, [], [2]), helper.make_tensor("zero", TP.INT64, [], [0])])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["sf", "totals"], body=body)],
              [vi("M", TP.INT64, []), vi("s0", TP.FLOAT, ["N"]), vi("x", TP.FLOAT, ["N"])],
              [vi("sf", TP.FLOAT, ["N"]), vi("totals", TP.FLOAT, ["T"])])
    for n, trips in ((3, 5), (1, 2)):
        assert_matches_ort(m, {"M": np.array(trips, np.int64), "s0": rng.random(n, dtype=np.float32),
                               "x": rng.random(n, dtype=np.float32) + 0.5})


def test_scan_inside_an_if_branch():
    body = helper.make_graph([helper.make_node("Add", ["a", "e"], ["a2"]), helper.make_node("Identity", ["a2"], ["o"])],
                             "body", [vi("a", TP.FLOAT, [2]), vi("e", TP.FLOAT, [2])],
                             [vi("a2", TP.FLOAT, [2]), vi("o", TP.FLOAT, [2])])
    then = helper.make_graph([helper.make_node("Scan", ["init", "x"], ["fin", "ys"], body=body, num_scan_inputs=1)],
                             "then", [], [vi("fin", TP.FLOAT, [2]), vi("ys", TP.FLOAT, ["T", 2])])
    other = helper.make_graph([helper.make_node("Identity", ["init"], ["fin2"]), helper.make_node("Neg", ["x"], ["ys2"])],
                              "else", [], [vi("fin2", TP.FLOAT, [2]), vi("ys2", TP.FLOAT, ["T", 2])])
    m = model([helper.make_node("If", ["c"], ["f", "y"], then_branch=then, else_branch=other)],
              [vi("c", TP.BOOL, []), vi("init", TP.FLOAT, [2]), vi("x", TP.FLOAT, ["T", 2])],
              [vi("f", TP.FLOAT, [2]), vi("y", TP.FLOAT, ["T", 2])])
    for c in (True, False):
        assert_matches_ort(m, {"c": np.array(c), "init": rng.random(2, dtype=np.float32),
                               "x": rng.random((4, 2), dtype=np.float32)})
