"""ai.onnx.ml ops against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import assert_matches_ort, make_model

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
