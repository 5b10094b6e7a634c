"""Values whose rank is known only at run time: compiled once per input signature.

Each pattern is a small model compared with onnxruntime on inputs that take each path; the
session compiles one specialisation per signature and reuses it (runtime/specialise.py).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc
from onnxc import driver
from helpers import make_model, run_ort

ort = pytest.importorskip("onnxruntime")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const(name: str, values, dtype=np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(values, dtype), name))


# The ONNX checker wants a shape on every graph output: each model declares the rank of one
# path, and a run on another path returns (like onnxruntime) what that path computes.


def squeeze_if_leading_one() -> onnx.ModelProto:
    """torch's export of ``x.squeeze(0)``: If(Shape(x)[0] == 1, Squeeze, Identity), then Neg."""
    then = helper.make_graph([const("ax", [0]), helper.make_node("Squeeze", ["x", "ax"], ["sq"])], "then", [],
                             [helper.make_tensor_value_info("sq", F, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [],
                              [helper.make_tensor_value_info("same", F, None)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), const("zero", 0),
             helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0), const("one", 1),
             helper.make_node("Equal", ["n", "one"], ["is_one"]),
             helper.make_node("If", ["is_one"], ["picked"], then_branch=then, else_branch=other),
             helper.make_node("Neg", ["picked"], ["y"])]
    return make_model(nodes, [("x", F, ["n", 3])], [("y", F, ["n", 3])])


def if_on_flag() -> onnx.ModelProto:
    """An If on a bool input: a flattened copy (rank 1) or the input itself (rank 2)."""
    then = helper.make_graph([const("flat", [-1]), helper.make_node("Reshape", ["x", "flat"], ["r"])], "then", [],
                             [helper.make_tensor_value_info("r", F, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [],
                              [helper.make_tensor_value_info("same", F, None)])
    nodes = [helper.make_node("If", ["flag"], ["picked"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["picked", "picked"], ["y"])]
    return make_model(nodes, [("x", F, ["a", "b"]), ("flag", B, [])], [("y", F, ["a", "b"])])


def squeeze_without_axes() -> onnx.ModelProto:
    return make_model([helper.make_node("Squeeze", ["x"], ["s"]), helper.make_node("Abs", ["s"], ["y"])],
                      [("x", F, ["a", 3, "b"])], [("y", F, ["a", 3, "b"])])


def reshape_to_runtime_length() -> onnx.ModelProto:
    """Reshape to a shape tensor fed at run time: its length, the output's rank, varies."""
    return make_model([helper.make_node("Reshape", ["x", "shape"], ["r"]),
                       helper.make_node("Add", ["r", "r"], ["y"])],
                      [("x", F, ["n"]), ("shape", I64, ["k"])], [("y", F, ["d0", "d1"])])


def compare(sess: onnxc.InferenceSession, model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> None:
    expected = run_ort(model, feed)
    actual = sess.run(None, feed)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, f"shape {a.shape}, onnxruntime {e.shape}"
        np.testing.assert_allclose(a, e, rtol=1e-6)


def specialisations(sess: onnxc.InferenceSession) -> int:
    return sess._model.specialisations


def test_if_branch_ranks_differ_on_input_shape():
    model = squeeze_if_leading_one()
    sess = onnxc.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for n in (1, 4, 1, 4):   # the squeezed path (rank 1), the other path (rank 2), each twice
        compare(sess, model, {"x": rng.standard_normal((n, 3)).astype(np.float32)})
    assert specialisations(sess) == 2


def test_if_branch_ranks_differ_on_input_value():
    model = if_on_flag()
    sess = onnxc.InferenceSession(model.SerializeToString())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for flag in (True, False, True):
        compare(sess, model, {"x": x, "flag": np.array(flag)})
    assert specialisations(sess) == 2


@pytest.mark.parametrize("shape", [(1, 3, 2), (2, 3, 1), (1, 3, 1), (2, 3, 4)])
def test_squeeze_without_axes_of_runtime_dims(shape):
    model = squeeze_without_axes()
    sess = onnxc.InferenceSession(model.SerializeToString())
    compare(sess, model, {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)})


def test_reshape_to_shape_of_runtime_length():
    model = reshape_to_runtime_length()
    sess = onnxc.InferenceSession(model.SerializeToString())
    x = np.arange(6, dtype=np.float32)
    for target in ([2, 3], [6], [1, 2, 3], [3, 2], [-1, 1, 2]):
        compare(sess, model, {"x": x, "shape": np.array(target, np.int64)})
    # lengths 2, 1 and 3: the shape's length (the output's rank) decides; its values are run-time data
    assert specialisations(sess) == 3


def test_specialisation_reused_from_the_cache(monkeypatch, tmp_path):
    """A second session with a signature compiled before loads it without compiling."""
    cache = tmp_path / "cache"   # (empty: no earlier run compiled the new signature below)
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(cache))
    model = squeeze_if_leading_one()
    feed = {"x": np.ones((1, 3), np.float32)}
    onnxc.InferenceSession(model.SerializeToString()).run(None, feed)
    builds = []
    real = driver.compile_model
    monkeypatch.setattr(driver, "compile_model", lambda *a, **k: builds.append(a) or real(*a, **k))
    sess = onnxc.InferenceSession(model.SerializeToString())
    compare(sess, model, feed)
    assert builds == []
    compare(sess, model, {"x": np.ones((5, 3), np.float32)})   # a new signature compiles
    assert len(builds) == 1


def test_artifact_folder_compiles_per_signature(tmp_path):
    """``compile_model`` writes the model for per-signature compiles; a session loads that folder."""
    model = squeeze_without_axes()
    manifest = onnxc.compile_model(model, str(tmp_path / "artifact"))
    assert manifest["specialise"] and manifest["library"] is None
    sess = onnxc.InferenceSession(str(tmp_path / "artifact"))
    assert [i.shape for i in sess.get_inputs()] == [["a", 3, "b"]]
    compare(sess, model, {"x": np.ones((1, 3, 2), np.float32)})


def test_static_model_is_compiled_once():
    """A model of fixed ranks takes the ordinary path: one library, no specialisation."""
    model = make_model([helper.make_node("Squeeze", ["x"], ["y"])], [("x", F, [1, 3, 1])], [("y", F, [3])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert not hasattr(sess._model, "specialisations")
    compare(sess, model, {"x": np.ones((1, 3, 1), np.float32)})


def test_rank_from_data_is_refused_clearly():
    """A rank no signature fixes (Squeeze without axes of NonZero's count) is a clear error."""
    model = make_model([helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Squeeze", ["nz"], ["y"])],
                       [("x", F, [4])], [("y", I64, ["d"])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    with pytest.raises(onnxc.UnsupportedError, match="known only at run time"):
        sess.run(None, {"x": np.array([0, 1, 0, 2], np.float32)})
