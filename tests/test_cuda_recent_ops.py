"""The operators added since the CUDA build was last surveyed (old opset versions, MaxRoiPool,
CategoryMapper, FeatureVectorizer, the random operators, CastMap, DictVectorizer): each is
taken by the CUDA build, run emulated and compared with onnxruntime, or refused with the
reason pinned in REFUSED (a session then runs the model on the CPU with a warning). A new
refusal, or a pinned one that builds, fails."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from helpers import cuda_session, make_model, run_ort
from onnxc.driver import CompileOptions, generate_source
from onnxc.runtime import cuda
from test_old_opsets import old_cnn

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
ML = {"ai.onnx.ml": 3}
RANDOM = "cannot draw random numbers (CUDA builds keep no generator state)"
MAPS = "map inputs ['m'] are only supported by the host runtime's InferenceSession"
# op -> why the CUDA build refuses it
REFUSED = {"RandomNormal": RANDOM, "RandomUniform": RANDOM, "RandomNormalLike": RANDOM, "RandomUniformLike": RANDOM,
           "Bernoulli": RANDOM, "Multinomial": RANDOM, "CastMap": MAPS, "DictVectorizer": MAPS}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def max_roi_pool():
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 3], spatial_scale=0.5)
    model = make_model([node], [("x", TP.FLOAT, [2, 3, 10, 12]), ("rois", TP.FLOAT, [4, 5])],
                       [("y", TP.FLOAT, [4, 3, 2, 3])], opset=16)
    rois = np.array([[0, 0, 0, 20, 18], [1, 4, 2, 9, 15], [0, 10, 10, 11, 11], [1, 0, 6, 23, 19]], np.float32)
    return model, {"x": rand(2, 3, 10, 12), "rois": rois}


def category_mapper(to_strings: bool):
    attrs = dict(cats_strings=["cat", "dog", "cow"], cats_int64s=[3, 1, 7])
    if to_strings:
        node = helper.make_node("CategoryMapper", ["x"], ["y"], domain="ai.onnx.ml", default_string="?", **attrs)
        model = make_model([node], [("x", TP.INT64, ["N"])], [("y", TP.STRING, ["N"])], extra_opsets=ML)
        return model, {"x": np.array([7, 3, 2, 1, 7], np.int64)}
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain="ai.onnx.ml", default_int64=-5, **attrs)
    model = make_model([node], [("x", TP.STRING, ["N"])], [("y", TP.INT64, ["N"])], extra_opsets=ML)
    return model, {"x": np.array(["dog", "cow", "yak", "cat"], object)}


def feature_vectorizer():
    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain="ai.onnx.ml", inputdimensions=[3, 4])
    model = make_model([node], [("a", TP.FLOAT, ["N", 3]), ("b", TP.FLOAT, ["N", 2])], [("y", TP.FLOAT, ["N", 7])],
                       extra_opsets=ML)
    return model, {"a": rand(300, 3), "b": rand(300, 2, seed=1)}


def random_op(op: str):
    x = [("x", TP.FLOAT, [4, 5])]
    node, inputs, out = {
        "RandomNormal": (helper.make_node("RandomNormal", [], ["y"], shape=[4, 5], seed=1.0), [], TP.FLOAT),
        "RandomUniform": (helper.make_node("RandomUniform", [], ["y"], shape=[4, 5], seed=1.0), [], TP.FLOAT),
        "RandomNormalLike": (helper.make_node("RandomNormalLike", ["x"], ["y"], seed=1.0), x, TP.FLOAT),
        "RandomUniformLike": (helper.make_node("RandomUniformLike", ["x"], ["y"], seed=1.0), x, TP.FLOAT),
        "Bernoulli": (helper.make_node("Bernoulli", ["x"], ["y"], seed=1.0), x, TP.FLOAT),
        "Multinomial": (helper.make_node("Multinomial", ["x"], ["y"], sample_size=3, seed=1.0), x, TP.INT32),
    }[op]
    shape = [4, 3] if op == "Multinomial" else [4, 5]
    feeds = {"x": np.random.default_rng(0).random((4, 5)).astype(np.float32)} if inputs else {}
    return make_model([node], inputs, [("y", out, shape)], opset=16), feeds


def map_op(op: str):
    if op == "CastMap":
        node = helper.make_node("CastMap", ["m"], ["y"], domain="ai.onnx.ml", map_form="SPARSE", max_map=4)
        key, out, shape = TP.INT64, TP.FLOAT, [1, 4]
    else:
        node = helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml", int64_vocabulary=[1, 2, 5])
        key, out, shape = TP.INT64, TP.FLOAT, [1, 3]
    m = helper.make_value_info("m", helper.make_map_type_proto(key, helper.make_tensor_type_proto(TP.FLOAT, None)))
    graph = helper.make_graph([node], "maps", [m], [helper.make_tensor_value_info("y", out, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 10
    return model, {"m": {1: 0.5, 2: -1.0}}


CASES = {
    "old opset 7": lambda: (old_cnn(7), {"x": rand(2, 3, 8, 8)}),
    "old opset 10": lambda: (old_cnn(10), {"x": rand(2, 3, 8, 8)}),
    "MaxRoiPool": max_roi_pool,
    "CategoryMapper strings to ints": lambda: category_mapper(False),
    "CategoryMapper ints to strings": lambda: category_mapper(True),
    "FeatureVectorizer": feature_vectorizer,
    **{op: (lambda op=op: random_op(op)) for op in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                                                    "RandomUniformLike", "Bernoulli", "Multinomial")},
    "CastMap": lambda: map_op("CastMap"),
    "DictVectorizer": lambda: map_op("DictVectorizer"),
}


def test_a_refused_op_runs_on_the_cpu_with_a_warning():
    model, feeds = random_op("RandomUniformLike")
    with pytest.warns(UserWarning, match="CUDAExecutionProvider cannot run this model .*" + RANDOM.split(" (")[0]):
        sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA, CPU])
    assert sess.get_providers() == [CPU]
    y = sess.run(None, feeds)[0]
    assert y.shape == (4, 5) and 0 <= y.min() and y.max() < 1 and len(np.unique(y)) == 20


@pytest.mark.parametrize("case", list(CASES))
def test_recent_ops_are_taken_or_refused_with_the_pinned_reason(case):
    model, feeds = CASES[case]()
    reason = REFUSED.get(case)
    try:
        generate_source(model, CompileOptions(target="cuda"))
    except onnxc.UnsupportedError as e:
        assert reason is not None, f"the CUDA build refuses {case}, which REFUSED does not pin: {e}"
        assert reason in str(e)
        return
    assert reason is None, f"the CUDA build takes {case} now: unpin it from REFUSED ({reason})"
    got = cuda_session(model).run(None, feeds)
    for g, w in zip(got, run_ort(model, feeds)):
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.kind in "biuO":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-2, atol=1e-3)   # (TF32 in the convolution)
