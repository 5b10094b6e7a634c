"""Map inputs (Python dicts) and the ai.onnx.ml operators that read them, against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from onnxc.compiler.errors import UnsupportedError

ML_OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]


def map_model(key: int, value: int, op: str, out_type: int, out_shape: list, **attrs) -> bytes:
    x = helper.make_value_info("x", helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None)))
    y = helper.make_tensor_value_info("y", out_type, out_shape)
    node = helper.make_node(op, ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    return helper.make_model(helper.make_graph([node], "maps", [x], [y]), opset_imports=ML_OPSETS).SerializeToString()


def ort_session(model: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def assert_same(model: bytes, feed: dict) -> list:
    ours = onnxc.InferenceSession(model).run(None, feed)
    theirs = ort_session(model).run(None, feed)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return ours


STRING_VOCABULARY = ["a", "b", "ému", 'quote" and \\ */']


@pytest.mark.parametrize("feed", [
    {"a": 1.5, "ému": -2.0},                                 # a vocabulary key missing
    {"b": 3.0, "zzz": 9.0, 'quote" and \\ */': 4.25},        # an extra key, a key needing escapes
    {"nothing": 1.0},                                        # no vocabulary key at all
    {"a": 1, "b": np.float32(2.5), "ému": np.float64(0.5)},  # numbers of other types
])
def test_dict_vectorizer_string_keys(feed):
    model = map_model(T.STRING, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 4], string_vocabulary=STRING_VOCABULARY)
    sess = onnxc.InferenceSession(model)
    ours, theirs = sess.get_inputs()[0], ort_session(model).get_inputs()[0]
    assert (ours.name, ours.type, ours.shape) == (theirs.name, theirs.type, theirs.shape) == \
        ("x", "map(string,tensor(float))", [])
    out = assert_same(model, {"x": feed})[0]
    expected = [float(np.float32(feed.get(word, 0))) for word in STRING_VOCABULARY]
    np.testing.assert_array_equal(out, np.array([expected], np.float32))


@pytest.mark.parametrize("feed", [{5: 1.0, 7: 2.0}, {1: -1.5, 100: 3.0, -4: 8.0}, {np.int64(7): 0.25}])
def test_dict_vectorizer_int64_keys(feed):
    model = map_model(T.INT64, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 4], int64_vocabulary=[7, -4, 5, 2])
    assert onnxc.InferenceSession(model).get_inputs()[0].type == "map(int64,tensor(float))"
    out = assert_same(model, {"x": feed})[0]
    np.testing.assert_array_equal(out, np.array([[feed.get(k, 0) for k in (7, -4, 5, 2)]], np.float32))


@pytest.mark.parametrize("key, vocabulary, feed", [
    (T.STRING, {"string_vocabulary": ["b", "a", "c"]}, {"a": 1, "c": 2, "d": 3}),
    (T.INT64, {"int64_vocabulary": [2, 1, 3]}, {1: 1, 3: 2, 4: 3}),
])
@pytest.mark.parametrize("value, npt, cast", [(T.DOUBLE, np.float64, lambda v: v + 0.5),
                                             (T.INT64, np.int64, lambda v: -v),
                                             (T.STRING, object, lambda v: f"é{v}")])
def test_dict_vectorizer_other_value_types(key, vocabulary, feed, value, npt, cast):
    """onnxruntime's Python binding feeds only float-valued maps, so these compare with numpy."""
    model = map_model(key, value, "DictVectorizer", value, [1, 3], **vocabulary)
    feed = {k: cast(v) for k, v in feed.items()}
    sess = onnxc.InferenceSession(model)
    assert sess.get_inputs()[0].type == f"map({'string' if key == T.STRING else 'int64'},tensor(" \
        f"{ {T.DOUBLE: 'double', T.INT64: 'int64', T.STRING: 'string'}[value] }))"
    out = sess.run(None, {"x": feed})[0]
    words = next(iter(vocabulary.values()))
    missing = "" if npt is object else 0
    np.testing.assert_array_equal(out, np.array([[feed.get(w, missing) for w in words]], npt))
    assert out.dtype == np.dtype(npt)


def test_empty_map_is_refused_as_by_onnxruntime():
    model = map_model(T.STRING, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 4], string_vocabulary=STRING_VOCABULARY)
    with pytest.raises(RuntimeError):
        ort_session(model).run(None, {"x": {}})
    with pytest.raises(onnxc.InvalidArgument, match="the map is empty"):
        onnxc.InferenceSession(model).run(None, {"x": {}})


CASTS = [("TO_FLOAT", T.FLOAT), ("TO_INT64", T.INT64), ("TO_STRING", T.STRING)]


@pytest.mark.parametrize("cast_to, out_type", CASTS)
@pytest.mark.parametrize("feed", [{3: 2.75, 0: 1.5, 1: -7.5}, {9: 4.0, 2: 1e10, 4: -0.5}, {0: 3.5}])
def test_cast_map_dense(cast_to, out_type, feed):
    model = map_model(T.INT64, T.FLOAT, "CastMap", out_type, [1, "n"], cast_to=cast_to, map_form="DENSE")
    out = assert_same(model, {"x": feed})[0]
    assert out.shape == (1, len(feed))


@pytest.mark.parametrize("cast_to, out_type", CASTS)
@pytest.mark.parametrize("feed", [{3: 2.75, 0: 1.5, 1: -7.5}, {9: 4.0, 4: -0.5}, {5: 1.0}, {2: 1e18}])
def test_cast_map_sparse(cast_to, out_type, feed):
    model = map_model(T.INT64, T.FLOAT, "CastMap", out_type, [1, 5], cast_to=cast_to, map_form="SPARSE", max_map=5)
    out = assert_same(model, {"x": feed})[0]
    assert out.shape == (1, 5)


def test_cast_map_sparse_negative_key_fails():
    model = map_model(T.INT64, T.FLOAT, "CastMap", T.FLOAT, [1, 5], cast_to="TO_FLOAT", map_form="SPARSE", max_map=5)
    with pytest.raises(onnxc.RuntimeFailure, match="negative key"):
        onnxc.InferenceSession(model).run(None, {"x": {-1: 1.0, 2: 3.0}})


@pytest.mark.parametrize("feed, message", [
    (np.zeros(4, np.float32), "give a dict, not ndarray"),
    ([{"a": 1.0}], "give a dict, not list"),
    ({1: 1.0}, "key 1 is a int, not a str"),
    ({"a": "text"}, "the values must be numbers"),
    ({"a": [1.0, 2.0]}, "the values must be numbers"),
])
def test_bad_map_feeds(feed, message):
    model = map_model(T.STRING, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 4], string_vocabulary=STRING_VOCABULARY)
    with pytest.raises(onnxc.InvalidArgument, match=message):
        onnxc.InferenceSession(model).run(None, {"x": feed})


def test_int64_keys_refuse_strings_and_floats():
    model = map_model(T.INT64, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 2], int64_vocabulary=[1, 2])
    sess = onnxc.InferenceSession(model)
    for feed in ({"1": 1.0}, {1.5: 1.0}, {True: 1.0}):
        with pytest.raises(onnxc.InvalidArgument, match="not an int"):
            sess.run(None, {"x": feed})


def test_dict_where_tensor_expected():
    x = helper.make_tensor_value_info("x", T.FLOAT, [2])
    y = helper.make_tensor_value_info("y", T.FLOAT, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=ML_OPSETS[:1]).SerializeToString()
    with pytest.raises(onnxc.InvalidArgument):
        onnxc.InferenceSession(model).run(None, {"x": {"a": 1.0}})


@pytest.mark.parametrize("estimator", ["logistic", "ridge"])
def test_sklearn_dict_vectorizer_pipeline(estimator):
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    words = ["red", "green", "blue", "size", "weight"]
    rows = [{w: float(rng.normal()) for w in rng.choice(words, size=3, replace=False)} for _ in range(40)]
    target = np.array([r.get("red", 0) + r.get("size", 0) > 0 for r in rows])
    model = LogisticRegression() if estimator == "logistic" else Ridge()
    pipe = make_pipeline(DictVectorizer(sparse=False), model).fit(rows, target.astype(int if estimator == "logistic"
                                                                                       else float))
    onx = convert_sklearn(pipe, initial_types=[("x", DictionaryType(StringTensorType([1]), FloatTensorType([1])))],
                          options={id(model): {"zipmap": False}} if estimator == "logistic" else None,
                          target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    ours, theirs = onnxc.InferenceSession(onx), ort_session(onx)
    for row in rows[:10] + [{"red": 2.0, "unseen": 5.0}]:
        a, b = ours.run(None, {"x": row}), theirs.run(None, {"x": row})
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
        if estimator == "ridge":
            np.testing.assert_allclose(a[0].ravel(), pipe.predict([row]), rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(a[0], pipe.predict([row]))


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_packages_and_cuda_refuse_map_inputs(tmp_path, target):
    from onnxc.driver import CompileOptions, compile_model
    model = map_model(T.STRING, T.FLOAT, "DictVectorizer", T.FLOAT, [1, 4], string_vocabulary=STRING_VOCABULARY)
    with pytest.raises(UnsupportedError, match=f"--target {target}: map inputs \\['x'\\]"):
        compile_model(model, str(tmp_path / "out"), CompileOptions(target=target))
