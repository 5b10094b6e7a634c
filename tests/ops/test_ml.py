"""ai.onnx.ml ops, and TfIdfVectorizer, against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import assert_matches_ort, assert_matches_ort_at_sizes, make_model

ML = {"ai.onnx.ml": 3}


@pytest.mark.parametrize("elem, npt", [(T.FLOAT, np.float32), (T.DOUBLE, np.float64), (T.INT64, np.int64)])
def test_binarizer(elem, npt):
    m = make_model([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)],
                   [("x", elem, ["n", 4])], [("y", elem, ["n", 4])], extra_opsets=ML)
    sess = onnxc.InferenceSession(m)
    for n in (3, 5):
        x = (np.random.default_rng(n).standard_normal((n, 4)) * 3).astype(npt)
        if npt is np.float32:  # onnxruntime implements Binarizer for float only
            assert_matches_ort(m, {"x": x})
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], (x > 0.5).astype(npt))


def test_array_feature_extractor():
    m = make_model([helper.make_node("ArrayFeatureExtractor", ["x", "idx"], ["y"], domain="ai.onnx.ml")],
                   [("x", T.FLOAT, ["n", 5]), ("idx", T.INT64, [3])], [("y", T.FLOAT, ["n", 3])], extra_opsets=ML)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert_matches_ort(m, {"x": x, "idx": np.array([4, 0, 2], np.int64)})
    with pytest.raises(onnxc.RuntimeFailure, match="index out of range"):
        onnxc.InferenceSession(m).run(None, {"x": x, "idx": np.array([5, 0, 2], np.int64)})


# --- CategoryMapper and FeatureVectorizer ---------------------------------------------------------

def category_mapper_model(x_type, y_type, **defaults):
    node = helper.make_node("CategoryMapper", ["X"], ["Y"], domain="ai.onnx.ml",
                            cats_strings=["cat", "dog", "", "ému"], cats_int64s=[3, -7, 0, 12], **defaults)
    return make_model([node], [("X", x_type, [2, "N"])], [("Y", y_type, [2, "N"])], opset=21,
                      extra_opsets={"ai.onnx.ml": 1})


def test_category_mapper_strings_to_ints():
    x = np.array([["dog", "cow", ""], ["ému", "cat", "Cat"]], dtype=object)
    assert_matches_ort(category_mapper_model(T.STRING, T.INT64, default_int64=42), {"X": x})


def test_category_mapper_ints_to_strings():
    x = np.array([[3, 5, 0], [-7, 12, -1]], dtype=np.int64)
    assert_matches_ort(category_mapper_model(T.INT64, T.STRING, default_string="none"), {"X": x})


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64, np.int32])
def test_feature_vectorizer(n, dtype):
    # widths that cut an input (b), zero-pad one (c) and take a 1-D input (d) as one row
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = [("a", elem, ["N", 2]), ("b", elem, ["N", 4]), ("c", elem, ["N", 1]),
              ("d", elem, [3] if n == 1 else ["N", 3])]
    node = helper.make_node("FeatureVectorizer", [i[0] for i in inputs], ["Y"], domain="ai.onnx.ml",
                            inputdimensions=[2, 3, 2, 3])
    m = make_model([node], inputs, [("Y", T.FLOAT, ["N", 10])], opset=21, extra_opsets={"ai.onnx.ml": 1})
    rng = np.random.default_rng(3)
    feeds = {name: (rng.standard_normal(shape) * 10).astype(dtype)
             for name, shape in (("a", (n, 2)), ("b", (n, 4)), ("c", (n, 1)), ("d", (3,) if n == 1 else (n, 3)))}
    assert_matches_ort(m, feeds)


def test_feature_vectorizer_needs_one_input_type():
    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["Y"], domain="ai.onnx.ml", inputdimensions=[1, 1])
    m = make_model([node], [("a", T.FLOAT, [1, 1]), ("b", T.INT64, [1, 1])], [("Y", T.FLOAT, [1, 2])], opset=21,
                   extra_opsets={"ai.onnx.ml": 1})
    with pytest.raises(onnxc.OnnxcError, match="same type"):
        onnxc.InferenceSession(m.SerializeToString())


# --- TfIdfVectorizer -----------------------------------------------------------

POOL = dict(pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7], ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6])
WEIGHTS = [0.5, 1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("mode,weights,min_len,max_len,skip,elem,dtype", [
    ("TF", None, 1, 1, 0, T.INT32, np.int32), ("TF", None, 1, 2, 3, T.INT64, np.int64),
    ("IDF", None, 2, 2, 0, T.INT64, np.int64), ("TFIDF", None, 1, 2, 1, T.INT32, np.int32),
    ("IDF", WEIGHTS, 1, 2, 2, T.INT64, np.int64), ("TFIDF", WEIGHTS, 2, 2, 3, T.INT32, np.int32)])
def test_tfidf(mode, weights, min_len, max_len, skip, elem, dtype):
    attrs = dict(POOL, mode=mode, min_gram_length=min_len, max_gram_length=max_len, max_skip_count=skip)
    if weights:
        attrs["weights"] = weights
    m = make_model([helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)], [("X", elem, [2, 12])],
                   [("Y", T.FLOAT, [2, 7])], opset=9)
    assert_matches_ort(m, {"X": np.random.default_rng(0).integers(1, 9, (2, 12)).astype(dtype)})


def test_tfidf_1d_symbolic():
    rng = np.random.default_rng(0)
    attrs = dict(POOL, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=1)
    m = make_model([helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)], [("X", T.INT64, ["C"])],
                   [("Y", T.FLOAT, [7])], opset=9)
    assert_matches_ort_at_sizes(m, lambda n: {"X": rng.integers(1, 9, n).astype(np.int64)}, (1, 20))
