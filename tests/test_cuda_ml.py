"""Parallel CUDA kernels of the ai.onnx.ml operators, the losses and the training optimizers
(templates/cuda/array_feature_extractor, imputer, linear_model, normalizer, one_hot_encoder,
scaler, svm, tree_ensemble, loss and optimizer .cu.j2) on the emulated CUDA build: sizes that
take several blocks, results compared with onnxruntime (with ONNX's reference for the optimizers,
which onnxruntime does not implement, and for double input), and the generated source checked to launch each node in
parallel (a grid of threads, or one or more blocks whose threads meet at barriers), not one
thread.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import make_inferred_model
from helpers import cuda_launches as launches
from helpers import cuda_session, make_model, run_ort
from models import KERNEL_PARAMS, f32, svc_attrs
from onnxc.runtime import cuda

ML3, ML5 = {"ai.onnx.ml": 3}, {"ai.onnx.ml": 5}
TRAINING = {"ai.onnx.preview.training": 1}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def compare(got, want, names, rtol, atol):
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


def check(model, feeds, expect_launch: dict[str, str], sess=None, rtol=1e-5, atol=1e-6,
          want=None) -> onnxc.InferenceSession:
    """Run on the emulated CUDA build, compare with onnxruntime (or `want`) and check the launches."""
    sess = sess or cuda_session(model)
    got = sess.run(None, feeds)
    want = run_ort(model, feeds) if want is None else want
    compare(got, want, [o.name for o in model.graph.output], rtol, atol)
    kinds = launches(sess)
    assert {n: kinds.get(n) for n in expect_launch} == expect_launch
    return sess


def build(nodes, inputs, outputs, inits=(), opset=18, extra=ML3):
    return make_inferred_model(nodes, inputs, outputs, inits, opset=opset, extra_opsets=extra)


def ml(op, inputs, outputs, name, **attrs):
    return helper.make_node(op, inputs, outputs, name=name, domain="ai.onnx.ml", **attrs)


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_feature_transforms_take_a_thread_per_element():
    """Scaler (per feature, one for all, a symbolic feature count that is checked at run time),
    Imputer (NaN per feature, an int64 value, per feature when the symbolic count matches),
    ArrayFeatureExtractor (run-time indices, out of range ones fail) and OneHotEncoder of int64
    and float input."""
    nodes = [ml("Scaler", ["x"], ["sp"], "ScalePer", scale=f32([0.5, 2, -1, 3, 0.25]), offset=f32([1, -1, 0.5, 0, 2])),
             ml("Scaler", ["x"], ["so"], "ScaleOne", scale=[1.5], offset=[-0.5]),
             ml("Scaler", ["xr"], ["sr"], "ScaleRun", scale=f32([0.5, 2, -1, 3, 0.25]), offset=f32([1, -1, 0.5, 0, 2])),
             ml("Imputer", ["x"], ["in"], "ImputeNan", imputed_value_floats=f32([9, 8, 7, 6, 5]),
                replaced_value_float=float("nan")),
             ml("Imputer", ["i"], ["ii"], "ImputeInt", imputed_value_int64s=[-7], replaced_value_int64=2),
             ml("Imputer", ["xr"], ["ir"], "ImputeRun", imputed_value_floats=f32([9, 8, 7, 6, 5]),
                replaced_value_float=0.0),
             ml("ArrayFeatureExtractor", ["w", "idx"], ["ex"], "Extract"),
             ml("OneHotEncoder", ["i"], ["oi"], "OneHotInt", cats_int64s=[4, 1, 9, 1, -2, 2], zeros=1),
             ml("OneHotEncoder", ["x"], ["of"], "OneHotFloat", cats_int64s=[0, 1, -1, 2, -2], zeros=1)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 5]), ("xr", TP.FLOAT, ["N", "F"]), ("i", TP.INT64, ["N", 4]),
                          ("w", TP.FLOAT, ["N", 40]), ("idx", TP.INT64, [6])],
                  [("sp", TP.FLOAT, ["N", 5]), ("so", TP.FLOAT, ["N", 5]), ("sr", TP.FLOAT, ["N", "F"]),
                   ("in", TP.FLOAT, ["N", 5]), ("ii", TP.INT64, ["N", 4]), ("ir", TP.FLOAT, ["N", "F"]),
                   ("ex", TP.FLOAT, ["N", 6]), ("oi", TP.FLOAT, ["N", 4, 6]), ("of", TP.FLOAT, ["N", 5, 5])])
    rng = np.random.default_rng(0)
    x = rand(120, 5) * 2
    x[rng.random(x.shape) < 0.2] = np.nan
    x[3, 2] = 1e30    # no int64 holds it: a zero row
    xr = rand(120, 5, seed=1)
    xr[rng.random(xr.shape) < 0.2] = 0
    feeds = {"x": x, "xr": xr, "i": rng.integers(-3, 10, (120, 4)), "w": rand(120, 40, seed=2),
             "idx": np.array([39, 0, 5, 5, 17, 22], np.int64)}
    grid = ("ScalePer", "ScaleOne", "ScaleRun", "ImputeNan", "ImputeInt", "ImputeRun", "Extract", "OneHotInt",
            "OneHotFloat")
    sess = check(model, feeds, {n: "grid" for n in grid})
    with pytest.raises(Exception, match=r"index out of range \(got 40\)"):
        sess.run(None, {**feeds, "idx": np.array([39, 0, 40, 5, 17, 22], np.int64)})
    with pytest.raises(Exception, match="feature count"):
        sess.run(None, {**feeds, "xr": rand(120, 4)})
    check(model, feeds, {}, sess=sess)   # a failed run leaves the session working

    strict = build([ml("OneHotEncoder", ["x"], ["o"], "OneHotStrict", cats_int64s=[3, 1, -1, 2, 0], zeros=0)],
                   [("x", TP.FLOAT, ["N", 3])], [("o", TP.FLOAT, ["N", 3, 5])])
    xs = np.random.default_rng(3).integers(-1, 4, (100, 3)).astype(np.float32)
    sess = check(strict, {"x": xs}, {"OneHotStrict": "grid"})
    xs[70, 1] = 7
    with pytest.raises(Exception, match="unknown category"):
        sess.run(None, {"x": xs})


def test_normalizer_takes_a_thread_or_a_block_per_row():
    """MAX, L1 and L2 of short rows (a thread each, N symbolic) and of long rows (a block each),
    with zero and negative rows, float and int32 input."""
    nodes = [ml("Normalizer", [src], [f"{norm}_{src}"], f"{norm.capitalize()}{src.capitalize()}", norm=norm)
             for src in ("short", "long", "ints") for norm in ("MAX", "L1", "L2")]
    model = build(nodes, [("short", TP.FLOAT, ["N", 7]), ("long", TP.FLOAT, [5, 300]), ("ints", TP.INT32, [3, 700])],
                  [(n.output[0], TP.FLOAT, ["N", 7] if n.input[0] == "short" else [5, 300] if n.input[0] == "long"
                    else [3, 700]) for n in nodes])
    short, long = rand(300, 7) * 3, rand(5, 300, seed=1) * 3
    short[5] = 0
    short[6] = -np.abs(short[6])    # the MAX of a negative row is negative
    long[1] = 0
    long[2] = -np.abs(long[2])
    ints = np.random.default_rng(2).integers(-20, 20, (3, 700)).astype(np.int32)
    check(model, {"short": short, "long": long, "ints": ints},
          {n.name: "grid" if n.name.endswith("Short") else "block" for n in nodes}, rtol=2e-5)


def test_linear_models_take_a_thread_per_row():
    """LinearClassifier with several classes (float and int32 input), a binary one (two labels)
    and one with one score and no labels; LinearRegressor with several targets (a post
    transform) and of double input."""
    rng = np.random.default_rng(0)
    coef = lambda n: f32(rng.standard_normal(n) * 0.4)   # noqa: E731
    nodes = [ml("LinearClassifier", ["x"], ["mc", "ms"], "Multi", coefficients=coef(30), intercepts=coef(5),
                classlabels_ints=[10, 11, 12, 13, 14], post_transform="SOFTMAX"),
             ml("LinearClassifier", ["x"], ["bc", "bs"], "Binary", coefficients=coef(6), intercepts=coef(1),
                classlabels_ints=[3, 7], post_transform="LOGISTIC"),
             ml("LinearClassifier", ["x"], ["sc", "ss"], "Single", coefficients=coef(6), intercepts=coef(1)),
             ml("LinearRegressor", ["x"], ["r3"], "Regress3", coefficients=coef(18), intercepts=coef(3), targets=3,
                post_transform="SOFTMAX_ZERO"),
             ml("LinearClassifier", ["xi"], ["ic", "is"], "MultiInt", coefficients=coef(18), intercepts=coef(3),
                classlabels_ints=[1, 2, 3], post_transform="SOFTMAX_ZERO")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 6]), ("xi", TP.INT32, ["N", 6])],
                  [("mc", TP.INT64, ["N"]), ("ms", TP.FLOAT, ["N", 5]), ("bc", TP.INT64, ["N"]),
                   ("bs", TP.FLOAT, ["N", 2]), ("sc", TP.INT64, ["N"]), ("ss", TP.FLOAT, ["N", 1]),
                   ("r3", TP.FLOAT, ["N", 3]), ("ic", TP.INT64, ["N"]), ("is", TP.FLOAT, ["N", 3])])
    feeds = {"x": rand(300, 6), "xi": np.random.default_rng(1).integers(-5, 5, (300, 6)).astype(np.int32)}
    check(model, feeds, {n.name: "grid" for n in nodes}, rtol=1e-5, atol=1e-6)

    # of double input, scores in double (onnxruntime takes float only: against ONNX's reference)
    double = build([ml("LinearRegressor", ["x"], ["y"], "RegressDouble", coefficients=coef(12), intercepts=coef(2),
                       targets=2)], [("x", TP.DOUBLE, ["N", 6])], [("y", TP.FLOAT, ["N", 2])])
    xd = {"x": rand(300, 6, seed=1, dtype=np.float64)}
    check(double, xd, {"RegressDouble": "grid"}, want=ReferenceEvaluator(double).run(None, xd), rtol=1e-6, atol=1e-7)

    # onnxruntime probits the N scores of a binary classifier packed at the start of Z
    probit = build([ml("LinearClassifier", ["x"], ["c", "s"], "BinaryProbit", coefficients=f32([0.01] * 6),
                       intercepts=[0.25], classlabels_ints=[3, 7], post_transform="PROBIT")],
                   [("x", TP.FLOAT, ["N", 6])], [("c", TP.INT64, ["N"]), ("s", TP.FLOAT, ["N", 2])])
    sess = cuda_session(probit)
    got, want = sess.run(None, {"x": feeds["x"]}), run_ort(probit, {"x": feeds["x"]})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1].reshape(-1)[:300], want[1].reshape(-1)[:300], rtol=1e-5, atol=1e-6)
    assert not got[1].reshape(-1)[300:].any()
    assert launches(sess) == {"BinaryProbit": "grid"}


def _svc(rng, name, kernel, classes, proba, pt, f=4, per_class=None, x="x"):
    attrs = svc_attrs(rng, kernel, classes, proba, pt, f, per_class=per_class, most=4)
    return ml("SVMClassifier", [x], [f"{name}_label", f"{name}_score"], name, **attrs)


def test_svms_take_a_thread_per_row():
    """SVMRegressor with support vectors, as a linear model and one-class; SVMClassifier with
    support vectors (probabilities, votes of many classes of double input, two classes) and as
    linear models."""
    rng = np.random.default_rng(1)
    f = 4
    regs = [ml("SVMRegressor", ["x"], ["r_rbf"], "RegressRbf", kernel_type="RBF", kernel_params=KERNEL_PARAMS["RBF"],
               n_supports=7, support_vectors=f32(rng.standard_normal(7 * f)), coefficients=f32(rng.standard_normal(7)),
               rho=[0.3]),
            ml("SVMRegressor", ["x"], ["r_poly"], "RegressPoly", kernel_type="POLY",
               kernel_params=KERNEL_PARAMS["POLY"], n_supports=5, support_vectors=f32(rng.standard_normal(5 * f)),
               coefficients=f32(rng.standard_normal(5)), rho=[-0.1]),
            ml("SVMRegressor", ["x"], ["r_lin"], "RegressLinear", coefficients=f32(rng.standard_normal(f)), rho=[0.2],
               kernel_params=[0.0, 0.0, 0.0]),
            ml("SVMRegressor", ["x"], ["r_one"], "OneClass", kernel_type="SIGMOID", kernel_params=KERNEL_PARAMS["SIGMOID"],
               n_supports=3, support_vectors=f32(rng.standard_normal(3 * f)), coefficients=f32(rng.standard_normal(3)),
               rho=[0.05], one_class=1)]
    classifiers = [_svc(rng, "Proba", "POLY", 4, True, "NONE"),
                   _svc(rng, "VotesDouble", "SIGMOID", 5, False, "NONE", per_class=[2, 0, 3, 1, 2], x="xd"),
                   _svc(rng, "Two", "RBF", 2, False, "LOGISTIC"),
                   _svc(rng, "TwoProba", "LINEAR", 2, True, "NONE"),
                   ml("SVMClassifier", ["x"], ["lin_label", "lin_score"], "Linear", classlabels_ints=[7, 8, 9],
                      coefficients=f32(rng.standard_normal(3 * f)), rho=[0.2], post_transform="SOFTMAX",
                      kernel_params=[0.0, 0.0, 0.0])]
    outputs = [(n.output[0], TP.FLOAT, ["N", 1]) for n in regs]
    for n in classifiers:
        outputs += [(n.output[0], TP.INT64, ["N"]), (n.output[1], TP.FLOAT, ["N", None])]
    model = build(regs + classifiers, [("x", TP.FLOAT, ["N", f]), ("xd", TP.DOUBLE, ["N", f])], outputs)
    feeds = {"x": rand(300, f, seed=2), "xd": rand(300, f, seed=3, dtype=np.float64)}
    check(model, feeds, {n.name: "grid" for n in regs + classifiers}, rtol=1e-4, atol=1e-5)


def _random_trees(rng, n_trees, depth, n_features, n_targets, modes=("BRANCH_LEQ",)):
    """TreeEnsembleRegressor/Classifier attributes of random trees (a weight for one target per leaf)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                         "treeids", "nodeids", "ids", "weights")}

    def grow(tree, node_id, d, count):
        for key, v in (("nodes_treeids", tree), ("nodes_nodeids", node_id), ("nodes_truenodeids", 0),
                       ("nodes_falsenodeids", 0)):
            a[key].append(v)
        pos = len(a["nodes_modes"])
        if d == depth or (d > 0 and rng.random() < 0.2):
            a["nodes_featureids"].append(0)
            a["nodes_modes"].append("LEAF")
            a["nodes_values"].append(0.0)
            a["nodes_missing_value_tracks_true"].append(0)
            a["treeids"].append(tree)
            a["nodeids"].append(node_id)
            a["ids"].append(int(rng.integers(n_targets)))
            a["weights"].append(float(np.float32(rng.standard_normal())))
            return
        a["nodes_featureids"].append(int(rng.integers(n_features)))
        a["nodes_modes"].append(str(rng.choice(modes)))
        a["nodes_values"].append(float(np.float32(rng.standard_normal())))
        a["nodes_missing_value_tracks_true"].append(int(rng.random() < 0.5))
        for slot in ("nodes_truenodeids", "nodes_falsenodeids"):
            count[0] += 1
            a[slot][pos] = count[0]
            grow(tree, count[0], d + 1, count)

    for t in range(n_trees):
        grow(t, 0, 0, [0])
    return a


def _tree_node(op, name, a, outputs, targets, **kw):
    prefix = "target" if op == "TreeEnsembleRegressor" else "class"
    attrs = {k: v for k, v in a.items() if k.startswith("nodes_")}
    attrs.update({f"{prefix}_treeids": a["treeids"], f"{prefix}_nodeids": a["nodeids"], f"{prefix}_ids": a["ids"],
                  f"{prefix}_weights": a["weights"]}, **kw)
    if op == "TreeEnsembleRegressor":
        attrs["n_targets"] = targets
    else:
        attrs["classlabels_int64s"] = list(range(20, 20 + targets))
    return ml(op, ["x"], outputs, name, **attrs)


def test_tree_ensembles_take_a_thread_per_row():
    """TreeEnsembleRegressor (SUM of three targets, AVERAGE with a base value, MAX with a post
    transform), TreeEnsembleClassifier (four classes, binary), rows with NaN features, every
    branch mode; TreeEnsemble (opset 5) of double input with set membership."""
    rng = np.random.default_rng(0)
    modes = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
    nodes = [_tree_node("TreeEnsembleRegressor", "RegressSum", _random_trees(rng, 5, 4, 6, 3), ["rs"], 3),
             _tree_node("TreeEnsembleRegressor", "RegressAvg", _random_trees(rng, 4, 5, 6, 1, modes), ["ra"], 1,
                        aggregate_function="AVERAGE", base_values=[0.5]),
             _tree_node("TreeEnsembleRegressor", "RegressMax", _random_trees(rng, 6, 3, 6, 4), ["rm"], 4,
                        aggregate_function="MAX", post_transform="SOFTMAX"),
             _tree_node("TreeEnsembleClassifier", "Classify4", _random_trees(rng, 6, 4, 6, 4, modes), ["c4", "s4"], 4,
                        post_transform="LOGISTIC"),
             _tree_node("TreeEnsembleClassifier", "Binary", _random_trees(rng, 5, 4, 6, 2), ["c2", "s2"], 2,
                        base_values=[0.1, -0.2])]
    model = build(nodes, [("x", TP.FLOAT, ["N", 6])],
                  [("rs", TP.FLOAT, ["N", 3]), ("ra", TP.FLOAT, ["N", 1]), ("rm", TP.FLOAT, ["N", 4]),
                   ("c4", TP.INT64, ["N"]), ("s4", TP.FLOAT, ["N", 4]), ("c2", TP.INT64, ["N"]),
                   ("s2", TP.FLOAT, ["N", 2])])
    x = rand(300, 6)
    x[::11, 2] = np.nan
    x[::5, 1] = np.round(x[::5, 1])    # some features equal a threshold
    check(model, {"x": x}, {n.name: "grid" for n in nodes}, rtol=1e-5, atol=1e-5)

    # TreeEnsemble (ai.onnx.ml 5): tree 0 is a set membership node (feature 0 in {1, 3}), then
    # x1 <= 0, then x2 > 1.5; tree 1 is x1 >= 0, then x0 < -1
    attrs = {"n_targets": 2, "aggregate_function": 1, "post_transform": 0, "tree_roots": [0, 3],
             "nodes_featureids": [0, 1, 2, 1, 0],
             "nodes_splits": numpy_helper.from_array(np.array([0.0, 0.0, 1.5, 0.0, -1.0], np.float64)),
             "nodes_modes": numpy_helper.from_array(np.array([6, 0, 3, 2, 1], np.uint8)),
             "nodes_truenodeids": [0, 1, 2, 4, 5], "nodes_trueleafs": [1, 1, 1, 0, 1],
             "nodes_falsenodeids": [1, 2, 3, 4, 6], "nodes_falseleafs": [0, 0, 1, 1, 1],
             "nodes_missing_value_tracks_true": [1, 0, 0, 1, 0],
             "membership_values": numpy_helper.from_array(np.array([1.0, 3.0, np.nan], np.float64)),
             "leaf_targetids": [0, 1, 0, 1, 0, 1, 0],
             "leaf_weights": numpy_helper.from_array(np.array([1.5, -2.0, 0.25, 3.0, -0.5, 0.75, 4.0], np.float64))}
    v5 = build([ml("TreeEnsemble", ["x"], ["y"], "Forest", **attrs)], [("x", TP.DOUBLE, ["N", 3])],
               [("y", TP.DOUBLE, ["N", 2])], extra=ML5)
    xd = np.random.default_rng(4).integers(0, 4, (300, 3)).astype(np.float64) - 0.5 * (np.arange(300) % 2)[:, None]
    xd[::13, 0] = np.nan
    check(v5, {"x": xd}, {"Forest": "grid"}, rtol=1e-12, atol=1e-12)


def test_losses_take_a_thread_per_sample_or_a_block():
    """SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: reduction none (a thread per sample,
    log_prob too) and sum / mean (one block, merged partial sums), with weights, ignore_index,
    trailing dims and a symbolic batch; a target out of range fails with its value."""
    nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["sce_none", "log_prob"], name="SceNone",
                              reduction="none"),
             helper.make_node("SoftmaxCrossEntropyLoss", ["x3", "t3", "w"], ["sce_mean"], name="SceMean",
                              reduction="mean", ignore_index=2),
             helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["nll_sum"], name="NllSum", reduction="sum"),
             helper.make_node("NegativeLogLikelihoodLoss", ["x4", "t4"], ["nll_none"], name="NllNone",
                              reduction="none", ignore_index=-1),
             helper.make_node("NegativeLogLikelihoodLoss", ["x4", "t4", "wd"], ["nll_mean"], name="NllMean",
                              ignore_index=-1)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 5]), ("t", TP.INT64, ["N"]), ("w", TP.FLOAT, [5]),
                          ("x3", TP.FLOAT, [40, 5, 9]), ("t3", TP.INT32, [40, 9]),
                          ("x4", TP.DOUBLE, ["B", 5, 4, 6]), ("t4", TP.INT64, ["B", 4, 6]), ("wd", TP.DOUBLE, [5])],
                  [("sce_none", TP.FLOAT, ["N"]), ("log_prob", TP.FLOAT, ["N", 5]), ("sce_mean", TP.FLOAT, []),
                   ("nll_sum", TP.FLOAT, []), ("nll_none", TP.DOUBLE, ["B", 4, 6]), ("nll_mean", TP.DOUBLE, [])],
                  opset=18)
    rng = np.random.default_rng(0)
    t4 = rng.integers(0, 5, (20, 4, 6))
    t4[rng.random(t4.shape) < 0.2] = -1
    feeds = {"x": rand(600, 5) * 3, "t": rng.integers(0, 5, 600), "w": np.abs(rand(5, seed=1)) + 0.1,
             "x3": rand(40, 5, 9, seed=2), "t3": rng.integers(0, 5, (40, 9)).astype(np.int32),
             "x4": rand(20, 5, 4, 6, seed=3, dtype=np.float64), "t4": t4, "wd": rand(5, seed=4, dtype=np.float64) ** 2}
    feeds["x"][7, 3] = np.nan    # its sample's loss and log_prob are NaN
    sess = check(model, feeds, {"SceNone": "grid", "SceMean": "block", "NllSum": "block", "NllNone": "grid",
                                "NllMean": "block"}, rtol=1e-5, atol=1e-6)
    # NllNone and NllMean read t4 (grid, then block), SceMean t3 (a block), SceNone and NllSum t (grid first)
    for name, value in (("t4", 5), ("t3", -3), ("t", 9)):
        bad = feeds[name].copy()
        bad.reshape(-1)[bad.size // 2] = value
        bad.reshape(-1)[bad.size - 1] = 77
        with pytest.raises(Exception, match=rf"target out of range \(got ({value}|77)\)"):
            sess.run(None, {**feeds, name: bad})
    bad = feeds["t3"].copy()
    bad[25, 3], bad[39, 8] = -3, 77
    with pytest.raises(Exception, match=r"SoftmaxCrossEntropyLoss: target out of range \(got -3\)"):
        sess.run(None, {**feeds, "t3": bad})   # the first such sample, as in C
    check(model, feeds, {}, sess=sess)


def _optimizer_model(op, n_tensors, shapes, **attrs):
    groups = {"Adagrad": (("X", "G", "H"), ("X_new", "H_new")), "Adam": (("X", "G", "V", "H"), ("X_new", "V_new", "H_new")),
              "Momentum": (("X", "G", "V"), ("X_new", "V_new"))}[op]
    ins = ["R", "T"] + [f"{g}{i}" for g in groups[0] for i in range(n_tensors)]
    outs = [f"{g}{i}" for g in groups[1] for i in range(n_tensors)]
    node = helper.make_node(op, ins, outs, name=op + attrs.get("mode", ""), domain="ai.onnx.preview.training", **attrs)
    inputs = [("R", TP.FLOAT, []), ("T", TP.INT64, [])]
    inputs += [(f"{g}{i}", TP.FLOAT, shapes[i]) for g in groups[0] for i in range(n_tensors)]
    outputs = [(f"{g}{i}", TP.FLOAT, shapes[i]) for g in groups[1] for i in range(n_tensors)]
    return make_model([node], inputs, outputs, opset=18, extra_opsets=TRAINING), node.name


def test_optimizers_take_a_thread_per_element():
    """Adagrad, Adam and Momentum (standard, nesterov) over two tensors, one with a symbolic dim,
    against ONNX's reference (onnxruntime does not implement them)."""
    shapes = [["N", 30], [7, 50]]
    rng = np.random.default_rng(0)
    cases = [_optimizer_model("Adagrad", 2, shapes, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01),
             _optimizer_model("Adam", 2, shapes, alpha=0.85, beta=0.99, norm_coefficient=0.02, norm_coefficient_post=0.1),
             _optimizer_model("Momentum", 2, shapes, alpha=0.9, beta=0.5, norm_coefficient=0.01, mode="standard"),
             _optimizer_model("Momentum", 2, shapes, alpha=0.8, beta=0.7, norm_coefficient=0.0, mode="nesterov")]
    for model, name in cases:
        feeds = {"R": np.array(0.05, np.float32), "T": np.array(3, np.int64)}
        for inp in model.graph.input[2:]:
            shape = (13, 30) if inp.name.endswith("0") else (7, 50)
            v = rng.standard_normal(shape).astype(np.float32)
            feeds[inp.name] = np.abs(v) if inp.name.startswith("H") else v
        reference = ReferenceEvaluator(model)
        sess = check(model, feeds, {name: "grid"}, want=reference.run(None, feeds), rtol=1e-5, atol=1e-6)
        feeds["T"] = np.array(0, np.int64)   # the first step: no bias correction, beta not applied
        check(model, feeds, {name: "grid"}, sess=sess, want=reference.run(None, feeds), rtol=1e-5, atol=1e-6)
