"""Softmax family and normalizations against onnxruntime (or the ONNX reference where onnxruntime lacks a case)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort, softmax_bfloat16_by_steps

RNG = np.random.default_rng(1)


def elem(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def assert_matches_reference(model, feeds, rtol=1e-5, atol=1e-6):
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = run_onnxc(model, feeds)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def same_shape_model(op_attrs, dtype, shape, opset, inputs=(), initializers=()):
    """One node per (op, attrs) on input X, each output shaped like X."""
    nodes = [helper.make_node(op, ["X", *inputs], [f"Y{i}"], **attrs) for i, (op, attrs) in enumerate(op_attrs)]
    outputs = [(f"Y{i}", elem(dtype), shape) for i in range(len(op_attrs))]
    return make_model(nodes, [("X", elem(dtype), shape)], outputs, initializers, opset=opset)


# ---- Softmax, LogSoftmax, Hardmax ------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family(opset):
    """Opset 11 coerces the input to 2-D at axis; opset 13 normalizes along the single axis."""
    variants = [(op, {} if axis is None else {"axis": axis})
                for op in ("Softmax", "LogSoftmax", "Hardmax") for axis in (None, 0, 1, -1)]
    model = same_shape_model(variants, np.float32, ["N", 3, 4], opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (2, 5):
        feeds = {"X": (RNG.standard_normal((n, 3, 4)) * 10).astype(np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_softmax_rows_with_wide_ranges_infinities_and_nan():
    """The float32 rows' exponentials of x - max: down to the smallest normal float the same as
    exp, 0 below it (terms of 1e-38 beside a sum of at least 1), -inf gives 0, a NaN anywhere
    in a row makes it NaN, rows of 16 lanes and a rest (37 columns)."""
    x = (RNG.standard_normal((6, 37)) * 10).astype(np.float32)
    x[0, :] = np.linspace(-110.0, 0.0, 37, dtype=np.float32)      # exponents through the normal limit
    x[1, 5] = -np.inf
    x[2, 30] = np.nan
    x[3, :] = np.float32(-3e38)                                   # equal rows far from 0
    x[4, 36] = 80.0                                               # one large value, the rest tiny
    model = same_shape_model([("Softmax", {"axis": -1}), ("LogSoftmax", {"axis": -1})], np.float32, [6, 37], 13)
    got, want = run_onnxc(model, {"X": x}), run_ort(model, {"X": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert np.isnan(got[0][2]).all() and not np.isnan(got[0][[0, 1, 3, 4, 5]]).any()
    np.testing.assert_allclose(got[0].sum(axis=-1)[[0, 1, 3, 4, 5]], 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_softmax_dtypes(dtype):
    variants = [("Softmax", {"axis": 1}), ("LogSoftmax", {"axis": -1})]
    model = same_shape_model(variants, dtype, [3, 5], 13)
    tol = 1e-3 if dtype == np.float16 else 1e-7
    assert_matches_ort(model, {"X": RNG.standard_normal((3, 5)).astype(dtype)}, rtol=tol, atol=tol)


def test_softmax_bfloat16():
    import ml_dtypes
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    model = same_shape_model([("Softmax", {}), ("Hardmax", {})], ml_dtypes.bfloat16, [2, 6], 13)
    got = run_onnxc(model, {"X": x.astype(ml_dtypes.bfloat16)})
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got[0].astype(np.float32), e / e.sum(1, keepdims=True), rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(got[1].astype(np.float32), np.eye(6)[x.argmax(1)])


def softmax_function_body(elem_type: int, shape: list, axis: int):
    """Softmax-13's function body as a graph: ReduceMax, Sub, Exp, ReduceSum, Div on ``elem_type``."""
    axes = helper.make_tensor("axes", TP.INT64, [1], [axis])
    nodes = [helper.make_node("ReduceMax", ["X", "axes"], ["max"]), helper.make_node("Sub", ["X", "max"], ["shifted"]),
             helper.make_node("Exp", ["shifted"], ["e"]), helper.make_node("ReduceSum", ["e", "axes"], ["total"]),
             helper.make_node("Div", ["e", "total"], ["Y"])]
    return make_model(nodes, [("X", elem_type, shape)], [("Y", elem_type, shape)], [axes], opset=18)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_bfloat16_as_the_reference_computes_it(axis):
    """A bfloat16 Softmax computes as ONNX's reference computes its function body, each step
    rounded to bfloat16 and the row summed in index order in bfloat16: bit for bit the reference
    on the Softmax node and on the function body as a graph, and the steps in numpy. (Rows along
    the last axis and strided ones: the C loops differ.)"""
    import ml_dtypes
    shape = [16, 24, 5]
    x = (RNG.standard_normal(shape) * 4).astype(ml_dtypes.bfloat16)
    softmax = same_shape_model([("Softmax", {"axis": axis})], ml_dtypes.bfloat16, shape, 13)
    got = run_onnxc(softmax, {"X": x})[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, softmax_bfloat16_by_steps(x, axis))
    np.testing.assert_array_equal(got, ReferenceEvaluator(softmax).run(None, {"X": x})[0])
    body = softmax_function_body(elem(ml_dtypes.bfloat16), shape, axis)
    np.testing.assert_array_equal(got, ReferenceEvaluator(body).run(None, {"X": x})[0])


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_float16_as_onnxruntime_computes_it(axis):
    """onnxruntime computes a float16 Softmax in float32 and rounds once; so does onnxc (its sum in
    double): within 1 ulp of float16 of onnxruntime, nearly every value the same bits."""
    shape = [32, 40, 3]
    x = (RNG.standard_normal(shape) * 3).astype(np.float16)
    model = same_shape_model([("Softmax", {"axis": axis})], np.float16, shape, 13)
    got = run_onnxc(model, {"X": x})[0]
    ulps = np.abs(got.view(np.int16).astype(np.int32) - run_ort(model, {"X": x})[0].view(np.int16).astype(np.int32))
    assert ulps.max() <= 1 and np.count_nonzero(ulps) <= got.size // 100, np.bincount(ulps.ravel())


# ---- LayerNormalization, RMSNormalization ------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization(axis):
    shape = ["N", 3, 4]
    norm = [3, 4][axis:] if axis == -1 else [3, 4]
    stats = ["N", 1, 1] if axis == 1 else ["N", 3, 1]
    nodes = [helper.make_node("LayerNormalization", ["X", "W", "B"], ["Y", "Mean", "InvStdDev"], axis=axis,
                              epsilon=1e-3),
             helper.make_node("LayerNormalization", ["X", "W1"], ["Y1"], axis=axis)]
    inputs = [("X", TP.FLOAT, shape), ("W", TP.FLOAT, norm), ("B", TP.FLOAT, norm), ("W1", TP.FLOAT, [4])]
    outputs = [("Y", TP.FLOAT, shape), ("Mean", TP.FLOAT, stats), ("InvStdDev", TP.FLOAT, stats),
               ("Y1", TP.FLOAT, shape)]
    model = make_model(nodes, inputs, outputs, opset=17)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (2, 3):
        feeds = {"X": RNG.standard_normal((n, 3, 4)).astype(np.float32),
                 "W": RNG.standard_normal(norm).astype(np.float32), "B": RNG.standard_normal(norm).astype(np.float32),
                 "W1": RNG.standard_normal(4).astype(np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_layer_normalization_float16():
    nodes = [helper.make_node("LayerNormalization", ["X", "W", "B"], ["Y", "Mean", "InvStdDev"])]
    model = make_model(nodes, [("X", TP.FLOAT16, [4, 8]), ("W", TP.FLOAT16, [8]), ("B", TP.FLOAT16, [8])],
                       [("Y", TP.FLOAT16, [4, 8]), ("Mean", TP.FLOAT, [4, 1]), ("InvStdDev", TP.FLOAT, [4, 1])],
                       opset=17)
    feeds = {"X": RNG.standard_normal((4, 8)).astype(np.float16), "W": RNG.standard_normal(8).astype(np.float16),
             "B": RNG.standard_normal(8).astype(np.float16)}
    assert_matches_ort(model, feeds, rtol=1e-2, atol=1e-2)


def test_rms_normalization():
    nodes = [helper.make_node("RMSNormalization", ["X", "W"], ["Y0"], epsilon=1e-3),
             helper.make_node("RMSNormalization", ["X", "W2"], ["Y1"], axis=1)]
    model = make_model(nodes, [("X", TP.FLOAT, ["N", 3, 4]), ("W", TP.FLOAT, [4]), ("W2", TP.FLOAT, [3, 4])],
                       [("Y0", TP.FLOAT, ["N", 3, 4]), ("Y1", TP.FLOAT, ["N", 3, 4])], opset=23)
    for n in (1, 3):
        feeds = {"X": RNG.standard_normal((n, 3, 4)).astype(np.float32), "W": RNG.standard_normal(4).astype(np.float32),
                 "W2": RNG.standard_normal((3, 4)).astype(np.float32)}
        assert_matches_reference(model, feeds)


# ---- GroupNormalization, InstanceNormalization, BatchNormalization ----------------------------

@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_normalization(groups):
    node = helper.make_node("GroupNormalization", ["X", "scale", "bias"], ["Y"], num_groups=groups, epsilon=1e-3)
    model = make_model([node], [("X", TP.FLOAT, ["N", 4, 3, 2]), ("scale", TP.FLOAT, [4]), ("bias", TP.FLOAT, [4])],
                       [("Y", TP.FLOAT, ["N", 4, 3, 2])], opset=21)
    feeds = {"X": RNG.standard_normal((2, 4, 3, 2)).astype(np.float32),
             "scale": RNG.standard_normal(4).astype(np.float32), "bias": RNG.standard_normal(4).astype(np.float32)}
    assert_matches_ort(model, feeds)


def test_instance_normalization_symbolic_channels():
    """scale's length is its own symbol: the kernel checks that it matches the channels."""
    node = helper.make_node("InstanceNormalization", ["X", "scale", "B"], ["Y"], epsilon=1e-2)
    model = make_model([node], [("X", TP.FLOAT, ["N", "C", 5]), ("scale", TP.FLOAT, ["S"]), ("B", TP.FLOAT, ["C"])],
                       [("Y", TP.FLOAT, ["N", "C", 5])], opset=22)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n, c in ((2, 3), (1, 4)):
        feeds = {"X": RNG.standard_normal((n, c, 5)).astype(np.float32),
                 "scale": RNG.standard_normal(c).astype(np.float32), "B": RNG.standard_normal(c).astype(np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
    with pytest.raises(onnxc.RuntimeFailure, match="wrong length"):
        sess.run(None, {"X": np.zeros((1, 3, 5), np.float32), "scale": np.ones(2, np.float32),
                        "B": np.ones(3, np.float32)})


@pytest.mark.parametrize("op, opset", [("LayerNormalization", 17), ("RMSNormalization", 23)])
def test_constant_scale_over_a_symbolic_normalized_dim(op, opset):
    """Scale is a constant of 8 values, the normalized dim a symbol (as an exporter's lost shape
    inference writes it, e.g. Swin's patch-merging channels): the model compiles, runs where
    the dim is 8 and fails clearly where it is not."""
    scale = helper.make_tensor("scale", TP.FLOAT, [8], RNG.standard_normal(8).astype(np.float32))
    node = helper.make_node(op, ["X", "scale"], ["Y"], axis=-1)
    model = make_model([node], [("X", TP.FLOAT, ["N", "C"])], [("Y", TP.FLOAT, ["N", "C"])], [scale], opset=opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    feeds = {"X": RNG.standard_normal((3, 8)).astype(np.float32)}
    np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(onnxc.RuntimeFailure, match="does not match the normalized axes"):
        sess.run(None, {"X": np.zeros((3, 6), np.float32)})


def batch_norm_inputs(c: int, dtype=np.float32) -> dict:
    return {"scale": RNG.standard_normal(c).astype(dtype), "B": RNG.standard_normal(c).astype(dtype),
            "mean": RNG.standard_normal(c).astype(dtype), "var": RNG.uniform(0.5, 2, c).astype(dtype)}


@pytest.mark.parametrize("opset,dtype", [(9, np.float32), (15, np.float64), (15, np.float16)])
def test_batch_normalization_inference(opset, dtype):
    node = helper.make_node("BatchNormalization", ["X", "scale", "B", "mean", "var"], ["Y"], epsilon=1e-3)
    params = [(name, elem(dtype), [3]) for name in ("scale", "B", "mean", "var")]
    model = make_model([node], [("X", elem(dtype), ["N", 3, 2, 2])] + params, [("Y", elem(dtype), ["N", 3, 2, 2])],
                       opset=opset)
    feeds = {"X": RNG.standard_normal((2, 3, 2, 2)).astype(dtype)} | batch_norm_inputs(3, dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    assert_matches_ort(model, feeds, rtol=tol, atol=tol)


def test_batch_normalization_spatial0():
    """Opset 7, spatial=0: one set of statistics per element of a sample."""
    node = helper.make_node("BatchNormalization", ["X", "scale", "B", "mean", "var"], ["Y"], spatial=0)
    params = [(name, TP.FLOAT, [3, 2]) for name in ("scale", "B", "mean", "var")]
    model = make_model([node], [("X", TP.FLOAT, [2, 3, 2])] + params, [("Y", TP.FLOAT, [2, 3, 2])], opset=7)
    feeds = {"X": RNG.standard_normal((2, 3, 2)).astype(np.float32)}
    feeds |= {k: v.reshape(3, 1).repeat(2, 1) + RNG.uniform(0, 0.1, (3, 2)).astype(np.float32)
              for k, v in batch_norm_inputs(3).items()}
    x, s, b, m, v = (feeds[k] for k in ("X", "scale", "B", "mean", "var"))
    np.testing.assert_allclose(run_onnxc(model, feeds)[0], s * (x - m) / np.sqrt(v + 1e-5) + b, rtol=1e-5, atol=1e-6)


def test_batch_normalization_training():
    node = helper.make_node("BatchNormalization", ["X", "scale", "B", "mean", "var"],
                            ["Y", "running_mean", "running_var"], training_mode=1, momentum=0.8)
    params = [(name, TP.FLOAT, [3]) for name in ("scale", "B", "mean", "var")]
    model = make_model([node], [("X", TP.FLOAT, [4, 3, 5])] + params,
                       [("Y", TP.FLOAT, [4, 3, 5]), ("running_mean", TP.FLOAT, [3]), ("running_var", TP.FLOAT, [3])],
                       opset=15)
    feeds = {"X": RNG.standard_normal((4, 3, 5)).astype(np.float32)} | batch_norm_inputs(3)
    assert_matches_reference(model, feeds)


# ---- LpNormalization, MeanVarianceNormalization, LRN ------------------------------------------

def test_lp_normalization():
    variants = [("LpNormalization", {"axis": axis, "p": p}) for axis in (0, -1) for p in (1, 2)]
    model = same_shape_model(variants, np.float32, [3, 4], 22)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    x[1] = 0  # a zero norm gives zeros
    assert_matches_ort(model, {"X": x})


def test_mean_variance_normalization():
    variants = [("MeanVarianceNormalization", {}), ("MeanVarianceNormalization", {"axes": [1]}),
                ("MeanVarianceNormalization", {"axes": [0, 1, 2, 3]})]
    model = same_shape_model(variants, np.float32, ["N", 3, 2, 2], 13)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (2, 4):
        feeds = {"X": RNG.standard_normal((n, 3, 2, 2)).astype(np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_lrn():
    variants = [("LRN", {"size": 3}), ("LRN", {"size": 5, "alpha": 0.01, "beta": 0.5, "bias": 2.0}),
                ("LRN", {"size": 1})]
    model = same_shape_model(variants, np.float32, [2, 6, 3, 3], 13)
    assert_matches_ort(model, {"X": RNG.standard_normal((2, 6, 3, 3)).astype(np.float32)})


def test_lrn_rows_on_threads_in_chunks():
    """GoogLeNet's LRN (size 5, beta 0.75: t^0.75 by square roots) and another beta over maps of
    300 positions (a chunk of 256, then 44), the (image, channel) rows split between 2 threads:
    the 1-thread build's bits, and onnxruntime's values."""
    variants = [("LRN", {"size": 5, "alpha": 1e-4, "beta": 0.75}), ("LRN", {"size": 3, "beta": 0.6, "bias": 1.5})]
    model = same_shape_model(variants, np.float32, [2, 16, 20, 15], 13)
    x = {"X": (RNG.standard_normal((2, 16, 20, 15)) * 30).astype(np.float32)}
    runs = []
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
        runs.append(onnxc.InferenceSession(model.SerializeToString(), so).run(None, x))
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two)
    assert_matches_ort(model, x)


def test_group_normalization_18_per_group(monkeypatch):
    """Opset 18 has scale and bias per group; the ONNX checker rejects it as deprecated, so skip the check."""
    monkeypatch.setattr("onnx.checker.check_model", lambda model, *args, **kwargs: None)
    node = helper.make_node("GroupNormalization", ["X", "scale", "bias"], ["Y"], num_groups=2)
    model = make_model([node], [("X", TP.FLOAT, [2, 4, 3]), ("scale", TP.FLOAT, [2]), ("bias", TP.FLOAT, [2])],
                       [("Y", TP.FLOAT, [2, 4, 3])], opset=18)
    x = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    scale, bias = RNG.standard_normal(2).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    groups = x.reshape(2, 2, 6)
    normalized = (groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-5)
    expected = normalized * scale[:, None] + bias[:, None]
    got = run_onnxc(model, {"X": x, "scale": scale, "bias": bias})[0]
    np.testing.assert_allclose(got, expected.reshape(2, 4, 3), rtol=1e-5, atol=1e-5)
