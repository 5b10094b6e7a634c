"""Bad feeds and bad data: wrong names, types, ranks and shapes are InvalidArgument before
anything runs; odd but valid arrays (non-contiguous, read-only, unaligned, byte-swapped, lists,
zero-sized dims) give onnxruntime's results; indices out of range make the run fail with a
RuntimeFailure naming the problem (as onnxruntime fails) instead of reading or writing out of
bounds."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture(scope="module")
def add_model() -> onnx.ModelProto:
    return make_model([helper.make_node("Add", ["a", "b"], ["y"])], [("a", T.FLOAT, ["n", 3]), ("b", T.FLOAT, ["n", 3])],
                      [("y", T.FLOAT, ["n", 3])])


@pytest.fixture(scope="module")
def add_session(add_model) -> onnxc.InferenceSession:
    return onnxc.InferenceSession(add_model.SerializeToString())


BAD_FEEDS = {
    "unknown name": ({"a": X, "b": X, "c": X}, "Invalid input name: c"),
    "missing input": ({"a": X}, r"Required inputs \(\['b'\]\) are missing"),
    "float64": ({"a": X.astype(np.float64), "b": X}, r"Actual: \(tensor\(double\)\) , expected: \(tensor\(float\)\)"),
    "int32": ({"a": X.astype(np.int32), "b": X}, r"Actual: \(tensor\(int32\)\)"),
    "strings": ({"a": X.astype(str), "b": X}, r"Actual: \(tensor\(string\)\)"),
    "rank 3": ({"a": X[None], "b": X}, "Invalid rank for input: a Got: 3 Expected: 2"),
    "rank 0": ({"a": np.float32(1), "b": X}, "Invalid rank for input: a Got: 0 Expected: 2"),
    "fixed dim": ({"a": np.ones((2, 4), np.float32), "b": X}, "(?s)invalid dimensions for input: a.*index: 1 Got: 4 Expected: 3"),
    "symbolic dim disagrees": ({"a": np.ones((3, 3), np.float32), "b": X}, "Dimension 'n' is 3 in input a"),
    "None": ({"a": None, "b": X}, "Required input 'a' is None"),
    "list out of range": ({"a": [[1e40, 0, 0]], "b": [[1, 2, 3]]}, None),
    "not a dict": ([X, X], "input_feed must be a dict"),
}


@pytest.mark.parametrize("case", sorted(BAD_FEEDS))
def test_bad_feed_is_an_invalid_argument_with_a_clear_message(add_model, add_session, case):
    feed, message = BAD_FEEDS[case]
    if case == "list out of range":   # float32 lists take what numpy takes (1e40 -> inf); use int8 instead
        model = make_model([helper.make_node("Identity", ["a"], ["y"])], [("a", T.INT8, [2])], [("y", T.INT8, [2])])
        sess, feed, message = onnxc.InferenceSession(model.SerializeToString()), {"a": [1, 300]}, "not a tensor\\(int8\\)"
        with pytest.raises(Exception):
            run_ort(model, feed)   # onnxruntime: "Could not create tensor from given input list"
    else:
        sess = add_session
        if case not in ("not a dict", "symbolic dim disagrees"):   # onnxruntime refuses them too
            with pytest.raises(Exception):
                run_ort(add_model, feed)
    with pytest.raises(onnxc.InvalidArgument, match=message):
        sess.run(None, feed)
    np.testing.assert_array_equal(sess.run(None, {"a": X, "b": X} if sess is add_session else {"a": np.int8([1, 2])})[0],
                                  X + X if sess is add_session else np.int8([1, 2]))


def test_invalid_argument_is_a_value_error_like_onnxruntime_maps_it(add_session):
    with pytest.raises(ValueError):
        add_session.run(None, {"a": X})
    with pytest.raises(onnxc.InvalidArgument, match="Invalid output name: z"):
        add_session.run(["z"], {"a": X, "b": X})


def test_odd_but_valid_arrays_give_onnxruntimes_results(add_model, add_session):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    readonly = X.copy()
    readonly.flags.writeable = False
    raw = np.zeros(X.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(2, 3)
    unaligned[...] = X
    feeds = {
        "transposed": np.ascontiguousarray(X.T).T,
        "strided": base[::2, ::2],
        "reversed": X[::-1, ::-1],
        "fortran": np.asfortranarray(X),
        "read-only": readonly,
        "broadcast view": np.broadcast_to(np.float32(2), (2, 3)),
        "unaligned": unaligned,
        "list": X.tolist(),
    }
    for label, a in feeds.items():
        feed = {"a": a, "b": X}
        expected = run_ort(add_model, feed)[0]
        np.testing.assert_array_equal(add_session.run(None, feed)[0], expected, err_msg=label)
    # byte-swapped arrays are read by value (onnxruntime reinterprets their bytes: a divergence)
    swapped = X.astype(">f4")
    np.testing.assert_array_equal(add_session.run(None, {"a": swapped, "b": X})[0], X + X)


def test_inputs_are_never_written():
    """Ops that update a copy of an input (ScatterND, ScatterElements) leave the caller's array alone."""
    nodes = [helper.make_node("ScatterND", ["d", "i", "u"], ["y"]),
             helper.make_node("ScatterElements", ["y", "j", "v"], ["z"], axis=1)]
    m = make_model(nodes, [("d", T.FLOAT, [3, 4]), ("i", T.INT64, [1, 2]), ("u", T.FLOAT, [1]),
                           ("j", T.INT64, [3, 1]), ("v", T.FLOAT, [3, 1])], [("z", T.FLOAT, [3, 4])])
    feed = {"d": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.array([[1, 2]]), "u": np.float32([-1]),
            "j": np.array([[0], [1], [3]]), "v": np.float32([[7], [8], [9]])}
    before = {k: v.copy() for k, v in feed.items()}
    sess = onnxc.InferenceSession(m.SerializeToString())
    np.testing.assert_array_equal(sess.run(None, feed)[0], run_ort(m, feed)[0])
    for k in feed:
        np.testing.assert_array_equal(feed[k], before[k], err_msg=k)
    readonly = {k: v.copy() for k, v in feed.items()}
    for v in readonly.values():
        v.flags.writeable = False
    np.testing.assert_array_equal(sess.run(None, readonly)[0], run_ort(m, feed)[0])


ZERO_SIZED = {
    "Relu": (2, [helper.make_node("Relu", ["a"], ["y"])], [("a", T.FLOAT, ["n", 3])], {"a": (0, 3)}),
    "Add broadcast": (2, [helper.make_node("Add", ["a", "b"], ["y"])], [("a", T.FLOAT, ["n", 3]), ("b", T.FLOAT, [1, 3])],
                      {"a": (0, 3), "b": (1, 3)}),
    "MatMul rows": (2, [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", T.FLOAT, ["m", 4]), ("b", T.FLOAT, [4, 5])],
                    {"a": (0, 4), "b": (4, 5)}),
    "MatMul inner": (2, [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", T.FLOAT, [3, "k"]), ("b", T.FLOAT, ["k", 5])],
                     {"a": (3, 0), "b": (0, 5)}),
    "ReduceSum empty axis": (1, [helper.make_node("ReduceSum", ["a", "ax"], ["y"], keepdims=0)],
                             [("a", T.FLOAT, [2, "n"]), ("ax", T.INT64, [1])], {"a": (2, 0), "ax": [1]}),
    "Softmax": (2, [helper.make_node("Softmax", ["a"], ["y"])], [("a", T.FLOAT, ["n", 3])], {"a": (0, 3)}),
    "Concat": (2, [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)], [("a", T.FLOAT, ["n", 3]), ("b", T.FLOAT, [2, 3])],
               {"a": (0, 3), "b": (2, 3)}),
    "Gather no indices": (2, [helper.make_node("Gather", ["a", "i"], ["y"])], [("a", T.FLOAT, [4, 3]), ("i", T.INT64, ["n"])],
                          {"a": (4, 3), "i": []}),
    "Gather from empty": (3, [helper.make_node("Gather", ["a", "i"], ["y"], axis=1)],
                          [("a", T.FLOAT, [4, "n"]), ("i", T.INT64, [2])], {"a": (4, 0), "i": [0, 0]}),
    "Transpose": (2, [helper.make_node("Transpose", ["a"], ["y"], perm=[1, 0])], [("a", T.FLOAT, ["n", 3])], {"a": (0, 3)}),
    "Conv batch": (4, [helper.make_node("Conv", ["a", "w"], ["y"])], [("a", T.FLOAT, ["n", 2, 5, 5]),
                                                                  ("w", T.FLOAT, [3, 2, 3, 3])],
                   {"a": (0, 2, 5, 5), "w": (3, 2, 3, 3)}),
    "ReduceMax empty axis": (1, [helper.make_node("ReduceMax", ["a"], ["y"], axes=[1], keepdims=0)],
                             [("a", T.FLOAT, [2, "n"])], {"a": (2, 0)}),
}


def _zero_sized_model(cases: list[str]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The cases side by side in one model (one compile), names prefixed by case."""
    nodes, inputs, outputs, feed = [], [], [], {}
    rng = np.random.default_rng(0)
    for c, case in enumerate(cases):
        rank, case_nodes, case_inputs, shapes = ZERO_SIZED[case]
        rename = {name: f"c{c}_{name}" for name, _, _ in case_inputs} | {"y": f"c{c}_y"}
        for node in case_nodes:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.input[:] = [rename[n] for n in node.input]
            copy.output[:] = [rename[n] for n in node.output]
            nodes.append(copy)
        for name, t, shape in case_inputs:
            inputs.append((rename[name], t, [f"c{c}_{d}" if isinstance(d, str) else d for d in shape]))
            feed[rename[name]] = (np.array(shapes[name], np.int64) if t == T.INT64
                                  else rng.standard_normal(shapes[name]).astype(np.float32))
        outputs.append((f"c{c}_y", T.FLOAT, [None] * rank))
    return make_model(nodes, inputs, outputs, opset=17), feed


def test_zero_sized_dims_match_onnxruntime():
    """(ReduceMax over an empty axis gives -inf in both at opset 17.)"""
    cases = sorted(c for c in ZERO_SIZED if c not in REFUSED_ZERO_SIZED)
    m, feed = _zero_sized_model(cases)
    expected = run_ort(m, feed)
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feed)
    for case, a, e in zip(cases, actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, case
        np.testing.assert_allclose(a, e, rtol=1e-5, err_msg=case)


# Empty inputs onnxruntime refuses, with what onnxc says.
REFUSED_ZERO_SIZED = {"Gather from empty": r"Gather: index out of range \(got 0\)"}


@pytest.mark.parametrize("case", sorted(REFUSED_ZERO_SIZED))
def test_zero_sized_dims_onnxruntime_refuses_fail_the_run(case):
    m, feed = _zero_sized_model([case])
    with pytest.raises(Exception):
        run_ort(m, feed)   # no index is inside an empty axis
    with pytest.raises(onnxc.RuntimeFailure, match=REFUSED_ZERO_SIZED[case]):
        onnxc.InferenceSession(m.SerializeToString()).run(None, feed)


def _index_case(op: str, itype: int = T.INT64):
    """(model, feed maker(indices), in-range indices, out-of-range index sets) for one indexing op."""
    data = ("d", T.FLOAT, [3, 4])
    if op == "Gather":
        m = make_model([helper.make_node("Gather", ["d", "i"], ["y"], axis=0)], [data, ("i", itype, [2])],
                       [("y", T.FLOAT, [2, 4])])
        return m, [[0, 2], [-3, -1], [2, -2]], [[0, 3], [-4, 0], [2**40, 0], [-(2**40), 1]]
    if op == "Gather axis 1":
        m = make_model([helper.make_node("Gather", ["d", "i"], ["y"], axis=1)], [data, ("i", itype, [2])],
                       [("y", T.FLOAT, [3, 2])])
        return m, [[0, 3], [-4, -1]], [[4, 0], [1, -5]]
    if op == "Embedding":
        w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32), "w")
        m = make_model([helper.make_node("Gather", ["w", "i"], ["y"])], [("i", itype, [2, 2])], [("y", T.FLOAT, [2, 2, 4])],
                       [w])
        return m, [[[0, 9], [-10, -1]]], [[[0, 10], [1, 2]], [[0, 1], [-11, 2]]]
    if op == "GatherElements":
        m = make_model([helper.make_node("GatherElements", ["d", "i"], ["y"], axis=1)], [data, ("i", itype, [3, 2])],
                       [("y", T.FLOAT, [3, 2])])
        return m, [[[0, 3], [-4, -1], [1, 2]]], [[[0, 4], [1, 1], [2, 2]], [[0, 1], [-5, 1], [2, 2]]]
    if op == "GatherND":
        m = make_model([helper.make_node("GatherND", ["d", "i"], ["y"])], [data, ("i", T.INT64, [2, 2])],
                       [("y", T.FLOAT, [2])])
        return m, [[[2, 3], [-3, -4]]], [[[3, 0], [0, 0]], [[0, 4], [0, 0]], [[0, 0], [-4, 0]]]
    if op == "ScatterElements":
        m = make_model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1)],
                       [data, ("i", itype, [3, 1]), ("u", T.FLOAT, [3, 1])], [("y", T.FLOAT, [3, 4])])
        return m, [[[0], [3], [-4]]], [[[0], [4], [1]], [[-5], [0], [1]]]
    if op == "ScatterElements add":
        m = make_model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0, reduction="add")],
                       [data, ("i", itype, [1, 4]), ("u", T.FLOAT, [1, 4])], [("y", T.FLOAT, [3, 4])])
        return m, [[[0, 2, -1, -3]]], [[[0, 3, 0, 0]], [[0, 0, 0, -4]]]
    if op == "ScatterND":
        m = make_model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"])],
                       [data, ("i", T.INT64, [2, 2]), ("u", T.FLOAT, [2])], [("y", T.FLOAT, [3, 4])])
        return m, [[[2, 3], [-3, -4]]], [[[3, 0], [0, 0]], [[0, 0], [0, -5]]]
    if op == "ScatterND rows":
        m = make_model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"])],
                       [data, ("i", T.INT64, [1, 1]), ("u", T.FLOAT, [1, 4])], [("y", T.FLOAT, [3, 4])])
        return m, [[[2]], [[-3]]], [[[3]], [[-4]]]
    raise AssertionError(op)


INDEX_OPS = ["Gather", "Gather axis 1", "Embedding", "GatherElements", "GatherND", "ScatterElements",
             "ScatterElements add", "ScatterND", "ScatterND rows"]


def _feed(model: onnx.ModelProto, indices) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    feed = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name == "i":
            feed["i"] = np.array(indices, dtype=onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        else:
            feed[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


# int32 indices go through the same kernels: three ops check them.
INDEX_CASES = [(op, T.INT64) for op in INDEX_OPS] + [(op, T.INT32) for op in ("Gather", "GatherElements", "ScatterElements")]


@pytest.mark.parametrize("op,itype", INDEX_CASES, ids=[f"{op}-{'int64' if t == T.INT64 else 'int32'}" for op, t in INDEX_CASES])
def test_indices_out_of_range_fail_the_run_like_onnxruntime(op, itype):
    model, good, bad = _index_case(op, itype)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for indices in good:   # negative indices within range count from the end
        feed = _feed(model, indices)
        np.testing.assert_array_equal(sess.run(None, feed)[0], run_ort(model, feed)[0], err_msg=str(indices))
    for indices in bad:
        if itype == T.INT32 and np.abs(np.array(indices)).max() >= 2**31:
            continue
        feed = _feed(model, indices)
        with pytest.raises(Exception):
            run_ort(model, feed)   # onnxruntime fails too (INVALID_ARGUMENT or FAIL)
        name = op.split()[0] if op != "Embedding" else "Gather"
        with pytest.raises(onnxc.RuntimeFailure, match=rf"{name}: index out of range \(got -?\d+\)"):
            sess.run(None, feed)
    # the session is still good after a failed run
    feed = _feed(model, good[0])
    np.testing.assert_array_equal(sess.run(None, feed)[0], run_ort(model, feed)[0])


def test_one_hot_ignores_indices_out_of_range_like_onnxruntime():
    """OneHot's spec (and onnxruntime) leave a row all off for an index outside [-depth, depth)."""
    m = make_model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=-1)],
                   [("i", T.INT64, [6]), ("depth", T.INT64, [1]), ("v", T.FLOAT, [2])], [("y", T.FLOAT, [6, None])])
    feed = {"i": np.array([0, 3, -1, -3, -4, 2**62]), "depth": np.array([3]), "v": np.float32([-1, 5])}
    expected = run_ort(m, feed)[0]
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feed)[0]
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(actual[[1, 4, 5]], np.full((3, 3), -1, np.float32))


def test_out_of_range_constant_indices_fail_at_run_time_like_onnxruntime():
    """Indices that are an initializer are checked too (onnxruntime fails the run, not the load)."""
    ci = numpy_helper.from_array(np.array([5], np.int64), "ci")
    m = make_model([helper.make_node("Gather", ["d", "ci"], ["y"])], [("d", T.FLOAT, [3, 4])], [("y", T.FLOAT, [1, 4])],
                   [ci])
    feed = {"d": np.ones((3, 4), np.float32)}
    with pytest.raises(Exception):
        run_ort(m, feed)
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxc.RuntimeFailure, match=r"Gather: index out of range \(got 5\)"):
        sess.run(None, feed)
