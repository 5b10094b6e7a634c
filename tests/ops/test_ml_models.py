"""ai.onnx.ml model operators (linear models, trees, SVMs, feature transforms) against onnxruntime.

Random models check every post transform, aggregate function, branch mode and the binary
classifier rules; models trained with scikit-learn and converted with skl2onnx run at the end
when those packages are installed.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort
from models import KERNEL_PARAMS, f32, svc_attrs
from tools import require_module
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc

ML1, ML3, ML5 = {"ai.onnx.ml": 1}, {"ai.onnx.ml": 3}, {"ai.onnx.ml": 5}
PTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
FEATURE_TYPES = [(T.FLOAT, np.float32), (T.DOUBLE, np.float64), (T.INT64, np.int64), (T.INT32, np.int32)]


def ml_node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="ai.onnx.ml", **attrs)


def close(actual, expected, rtol=1e-4, atol=1e-5):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def features(npt, shape, seed=0, scale=2.0):
    r = np.random.default_rng(seed).standard_normal(shape) * scale
    return r.astype(npt) if np.dtype(npt).kind == "f" else np.round(r).astype(npt)


# --- linear models ------------------------------------------------------------------------------

@pytest.mark.parametrize("pt", PTS)
@pytest.mark.parametrize("kind", ["binary", "single", 3, 5])
def test_linear_classifier(pt, kind):
    rng = np.random.default_rng(len(pt) * 3 + len(str(kind)))
    c = 4
    targets = kind if isinstance(kind, int) else 1
    attrs = {"coefficients": f32(rng.standard_normal(targets * c) * 0.4),
             "intercepts": f32(rng.standard_normal(targets) * 0.1), "post_transform": pt}
    if kind == "binary":
        attrs["classlabels_ints"] = [3, 7]
    elif kind != "single":
        attrs["classlabels_ints"] = list(range(10, 10 + targets))
    columns = 2 if kind == "binary" else targets
    m = make_model([ml_node("LinearClassifier", ["x"], ["y", "z"], **attrs)], [("x", T.FLOAT, ["n", c])],
                   [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", columns])], extra_opsets=ML1)
    for n in (1, 4, 9):
        feeds = {"x": features(np.float32, (n, c), n)}
        if kind == "binary" and pt == "PROBIT":
            # onnxruntime probits the n scores packed at the start of Z and leaves the rest unset
            actual, expected = run_onnxc(m, feeds), run_ort(m, feeds)
            np.testing.assert_array_equal(actual[0], expected[0])
            close(actual[1].reshape(-1)[:n], expected[1].reshape(-1)[:n])
        else:
            assert_matches_ort(m, feeds)


@pytest.mark.parametrize("elem, npt", FEATURE_TYPES)
def test_linear_classifier_input_types(elem, npt):
    node = ml_node("LinearClassifier", ["x"], ["y", "z"], coefficients=f32([0.5, -0.25, 1.0, 0.1, 0.3, -0.7]),
                   intercepts=[0.25, -0.5], classlabels_ints=[-4, 9], post_transform="SOFTMAX")
    for shape in ([3], [5, 3]):
        rows = shape[0] if len(shape) == 2 else 1
        m = make_model([node], [("x", elem, shape)], [("y", T.INT64, [rows]), ("z", T.FLOAT, [rows, 2])],
                       extra_opsets=ML1)
        assert_matches_ort(m, {"x": features(npt, shape)})


@pytest.mark.parametrize("pt", PTS)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(pt, targets):
    rng = np.random.default_rng(targets)
    node = ml_node("LinearRegressor", ["x"], ["y"], coefficients=f32(rng.standard_normal(targets * 5) * 0.3),
                   intercepts=f32(rng.standard_normal(targets) * 0.1), targets=targets, post_transform=pt)
    m = make_model([node], [("x", T.FLOAT, ["n", 5])], [("y", T.FLOAT, ["n", targets])], extra_opsets=ML1)
    for n in (1, 6):
        assert_matches_ort(m, {"x": features(np.float32, (n, 5), n)})


def test_linear_errors():
    strings = ml_node("LinearClassifier", ["x"], ["y", "z"], coefficients=[1.0, 2.0], intercepts=[0.0, 1.0],
                      classlabels_strings=["a", "b"])
    m = make_model([strings], [("x", T.FLOAT, ["n", 1])], [("y", T.STRING, ["n"]), ("z", T.FLOAT, ["n", 2])],
                   extra_opsets=ML1)
    for n in (1, 3):  # string class labels
        assert_matches_ort(m, {"x": features(np.float32, (n, 1), n)})
    node = ml_node("LinearRegressor", ["x"], ["y"], coefficients=[1.0, 2.0, 3.0])
    m = make_model([node], [("x", T.FLOAT, ["n", "c"])], [("y", T.FLOAT, ["n", 1])], extra_opsets=ML1)
    with pytest.raises(onnxc.RuntimeFailure, match="number of features"):
        run_onnxc(m, {"x": np.zeros((2, 4), np.float32)})
    np.testing.assert_allclose(run_onnxc(m, {"x": np.ones((2, 3), np.float32)})[0], [[6.0], [6.0]])


# --- feature transforms -------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("elem, npt", FEATURE_TYPES)
def test_normalizer(norm, elem, npt):
    node = ml_node("Normalizer", ["x"], ["y"], norm=norm)
    for shape, concrete in (([5], [5]), (["n", 4], [4, 4])):
        m = make_model([node], [("x", elem, shape)], [("y", T.FLOAT, shape)], extra_opsets=ML1)
        x = features(npt, concrete, 3)
        if len(concrete) == 2:
            x[1] = 0  # a zero row is copied
            x[2] = -np.abs(x[2])  # the MAX of a negative row is negative
        assert_matches_ort(m, {"x": x})


@pytest.mark.parametrize("elem, npt", FEATURE_TYPES)
@pytest.mark.parametrize("count", [1, 4])
def test_scaler(elem, npt, count):
    node = ml_node("Scaler", ["x"], ["y"], offset=[0.5, -1.25, 2.0, 0.1][:count], scale=[2.0, 0.3, -1.5, 4.0][:count])
    for shape, concrete in (([4], [4]), (["n", 4], [3, 4])):
        m = make_model([node], [("x", elem, shape)], [("y", T.FLOAT, shape)], extra_opsets=ML1)
        assert_matches_ort(m, {"x": features(npt, concrete)})


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("replaced", [float("nan"), 0.0, 1.5])
def test_imputer_float(count, replaced):
    node = ml_node("Imputer", ["x"], ["y"], imputed_value_floats=[9.0, -7.5, 3.25][:count],
                   replaced_value_float=replaced)
    m = make_model([node], [("x", T.FLOAT, ["n", 3])], [("y", T.FLOAT, ["n", 3])], extra_opsets=ML1)
    x = np.array([[np.nan, 0.0, 1.5], [1.5, np.nan, 0.0], [2.0, 3.0, 4.0], [0, 0, np.nan]], np.float32)
    assert_matches_ort(m, {"x": x})


@pytest.mark.parametrize("count", [1, 3])
def test_imputer_int64(count):
    node = ml_node("Imputer", ["x"], ["y"], imputed_value_int64s=[9, -7, 3][:count], replaced_value_int64=-1)
    m = make_model([node], [("x", T.INT64, ["n", 3])], [("y", T.INT64, ["n", 3])], extra_opsets=ML1)
    assert_matches_ort(m, {"x": np.array([[-1, 0, 5], [2, -1, -1]], np.int64)})


@pytest.mark.parametrize("elem, npt", [(T.INT64, np.int64), (T.FLOAT, np.float32), (T.DOUBLE, np.float64)])
@pytest.mark.parametrize("zeros", [0, 1])
def test_one_hot_encoder(elem, npt, zeros):
    node = ml_node("OneHotEncoder", ["x"], ["y"], cats_int64s=[4, -2, 7, 0, 4], zeros=zeros)
    m = make_model([node], [("x", elem, ["n", 2])], [("y", T.FLOAT, ["n", 2, 5])], extra_opsets=ML1)
    assert_matches_ort(m, {"x": np.array([[4, -2], [7, 0], [0, 4]], npt)})
    unknown = {"x": np.array([[4, 3]], npt)}
    if zeros:
        assert_matches_ort(m, unknown)
    else:
        with pytest.raises(onnxc.RuntimeFailure, match="unknown category"):
            run_onnxc(m, unknown)


# --- trees --------------------------------------------------------------------------------------

def random_trees(rng, n_trees, depth, n_features, n_targets, modes=("BRANCH_LEQ",), missing=False,
                 weights_per_leaf=1, eq_values=None):
    """TreeEnsembleRegressor/Classifier attributes of random trees; node ids are shuffled within each tree
    and leaves hold ``weights_per_leaf`` weights for distinct targets."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                         "treeids", "nodeids", "ids", "weights")}

    def build(tree, node_id, d, count):
        a["nodes_treeids"].append(tree)
        a["nodes_nodeids"].append(node_id)
        pos = len(a["nodes_modes"])
        a["nodes_truenodeids"].append(0)
        a["nodes_falsenodeids"].append(0)
        if d == depth or (d > 0 and rng.random() < 0.2):
            a["nodes_featureids"].append(0)
            a["nodes_modes"].append("LEAF")
            a["nodes_values"].append(0.0)
            a["nodes_missing_value_tracks_true"].append(0)
            for c in rng.choice(n_targets, size=min(weights_per_leaf, n_targets), replace=False):
                a["treeids"].append(tree)
                a["nodeids"].append(node_id)
                a["ids"].append(int(c))
                a["weights"].append(float(np.float32(rng.standard_normal())))
            return
        mode = str(rng.choice(modes))
        value = rng.choice(eq_values) if eq_values is not None and mode in ("BRANCH_EQ", "BRANCH_NEQ") \
            else rng.standard_normal()
        a["nodes_featureids"].append(int(rng.integers(n_features)))
        a["nodes_modes"].append(mode)
        a["nodes_values"].append(float(np.float32(value)))
        a["nodes_missing_value_tracks_true"].append(int(missing and rng.random() < 0.5))
        for slot in ("nodes_truenodeids", "nodes_falsenodeids"):
            count[0] += 1
            a[slot][pos] = count[0]
            build(tree, count[0], d + 1, count)

    for t in range(n_trees):
        start_nodes, start_weights, count = len(a["nodes_nodeids"]), len(a["nodeids"]), [0]
        build(t * 7 + 3, 0, 0, count)
        perm = [int(v) for v in rng.permutation(count[0] + 1)]  # node ids need not follow the node order
        for key in ("nodes_nodeids", "nodes_truenodeids", "nodes_falsenodeids"):
            a[key][start_nodes:] = [perm[i] for i in a[key][start_nodes:]]
        a["nodeids"][start_weights:] = [perm[i] for i in a["nodeids"][start_weights:]]
    return a


def regressor_attrs(a, n_targets, **kw):
    out = {k: v for k, v in a.items() if k.startswith("nodes_")}
    out.update(target_treeids=a["treeids"], target_nodeids=a["nodeids"], target_ids=a["ids"],
               target_weights=a["weights"], n_targets=n_targets, **kw)
    return out


def classifier_attrs(a, labels, **kw):
    out = {k: v for k, v in a.items() if k.startswith("nodes_")}
    out.update(class_treeids=a["treeids"], class_nodeids=a["nodeids"], class_ids=a["ids"],
               class_weights=a["weights"], classlabels_int64s=labels, **kw)
    return out


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("pt", PTS)
@pytest.mark.parametrize("targets", [1, 3])
def test_tree_regressor(aggregate, pt, targets):
    rng = np.random.default_rng(len(aggregate) * 10 + len(pt) + targets)
    a = random_trees(rng, 5, 4, 4, targets, modes=MODES[:4], weights_per_leaf=2 if targets > 1 else 1)
    node = ml_node("TreeEnsembleRegressor", ["x"], ["y"], **regressor_attrs(
        a, targets, aggregate_function=aggregate, post_transform=pt, base_values=f32(rng.standard_normal(targets))))
    m = make_model([node], [("x", T.FLOAT, ["n", 4])], [("y", T.FLOAT, ["n", targets])], extra_opsets=ML3)
    for n in (1, 20):
        assert_matches_ort(m, {"x": features(np.float32, (n, 4), n, 1.0)})


def _one_score_rows(actual, expected):
    """Rows where onnxruntime leaves the second score column unset (one score left in the binary rules)."""
    return (actual[:, 1] == 0) & ~np.isclose(actual[:, 1], expected[:, 1], equal_nan=True)


@pytest.mark.parametrize("pt", PTS)
@pytest.mark.parametrize("case, base", [(c, b) for c in ("class1", "class1-mixed", "class0", "both") for b in (0, 1, 2)]
                         + [(c, b) for c in ("multi", "multi-partial") for b in (0, 4)])
def test_tree_classifier(pt, case, base):
    """Two classes: weights for class 1 only (all positive, or mixed signs), class 0 only, or both; more classes:
    weights for several classes per leaf or one."""
    rng = np.random.default_rng(len(pt) * 7 + len(case) + base)
    classes = 4 if case.startswith("multi") else 2
    a = random_trees(rng, 4, 3, 3, classes, modes=MODES[:4],
                     weights_per_leaf={"both": 2, "multi": 3}.get(case, 1))
    if case.startswith("class"):
        a["ids"] = [0 if case == "class0" else 1] * len(a["ids"])
        w = np.array(a["weights"]) * 0.3
        a["weights"] = f32(w if case == "class1-mixed" else np.abs(w))
    kw = {"base_values": f32(rng.standard_normal(base) * 0.2)} if base else {}
    node = ml_node("TreeEnsembleClassifier", ["x"], ["y", "z"],
                   **classifier_attrs(a, [10 * i + 5 for i in range(classes)], post_transform=pt, **kw))
    m = make_model([node], [("x", T.FLOAT, ["n", 3])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", classes])],
                   extra_opsets=ML3)
    feeds = {"x": features(np.float32, (30, 3), base, 1.0)}
    actual, expected = run_onnxc(m, feeds), run_ort(m, feeds)
    np.testing.assert_array_equal(actual[0], expected[0])
    if classes == 2 and (pt == "PROBIT" or base == 1) and case != "class1":
        unset = _one_score_rows(actual[1], expected[1])
        close(actual[1][:, 0], expected[1][:, 0])
        close(actual[1][~unset], expected[1][~unset])
    else:
        close(actual[1], expected[1])


@pytest.mark.parametrize("pt", ["NONE", "PROBIT"])
@pytest.mark.parametrize("base", [0, 1])
def test_tree_classifier_one_class(pt, base):
    a = random_trees(np.random.default_rng(2), 3, 3, 2, 1)
    kw = {"base_values": [0.25]} if base else {}
    node = ml_node("TreeEnsembleClassifier", ["x"], ["y", "z"], **classifier_attrs(a, [42], post_transform=pt, **kw))
    m = make_model([node], [("x", T.FLOAT, ["n", 2])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", 1])],
                   extra_opsets=ML3)
    assert_matches_ort(m, {"x": features(np.float32, (12, 2), 1, 1.0)})


@pytest.mark.parametrize("elem, npt", FEATURE_TYPES)
@pytest.mark.parametrize("modes", [("BRANCH_LEQ",), ("BRANCH_EQ",), tuple(MODES)])
def test_tree_modes_types_missing(elem, npt, modes):
    """Every branch mode (one for all nodes, or mixed), NaN features with missing_value_tracks_true."""
    rng = np.random.default_rng(len(modes))
    is_float = np.dtype(npt).kind == "f"
    a = random_trees(rng, 6, 4, 3, 3, modes=modes, missing=is_float, weights_per_leaf=2,
                     eq_values=[0.0, 1.0, -1.0, 2.0])
    node = ml_node("TreeEnsembleClassifier", ["x"], ["y", "z"],
                   **classifier_attrs(a, [1, 2, 3], post_transform="SOFTMAX"))
    m = make_model([node], [("x", elem, ["n", 3])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", 3])], extra_opsets=ML3)
    x = np.round(features(np.float64, (30, 3), 4, 1.5)).astype(npt)
    if is_float:
        x[::5, 0] = np.nan
    assert_matches_ort(m, {"x": x})


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_regressor_double_as_tensor(aggregate):
    """Opset 3's *_as_tensor attributes hold double thresholds, weights and base values for double inputs."""
    rng = np.random.default_rng(5)
    a = random_trees(rng, 5, 4, 4, 2, modes=MODES[:4], weights_per_leaf=2)
    attrs = regressor_attrs(a, 2, aggregate_function=aggregate)
    attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop("nodes_values")) + 1e-9)
    attrs["target_weights_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop("target_weights")) * (1 + 1e-12))
    attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array([0.1, -0.2]))
    m = make_model([ml_node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [("x", T.DOUBLE, ["n", 4])],
                   [("y", T.FLOAT, ["n", 2])], extra_opsets=ML3)
    assert_matches_ort(m, {"x": rng.standard_normal((25, 4))})


def test_tree_shapes():
    """A static batch; a symbolic feature count checked at run time; X must be a matrix (as onnx infers)."""
    a = random_trees(np.random.default_rng(8), 3, 3, 3, 2, weights_per_leaf=2)
    node = ml_node("TreeEnsembleRegressor", ["x"], ["y"], **regressor_attrs(a, 2))
    with pytest.raises(onnxc.ShapeError, match=r"must be \[N, C\]"):
        onnxc.InferenceSession(make_model([node], [("x", T.FLOAT, [3])], [("y", T.FLOAT, [1, 2])], extra_opsets=ML3))
    for shape, concrete in (([5, 3], [5, 3]), (["n", "c"], [4, 3])):
        m = make_model([node], [("x", T.FLOAT, shape)], [("y", T.FLOAT, [shape[0], 2])], extra_opsets=ML3)
        assert_matches_ort(m, {"x": features(np.float32, concrete, 1, 1.0)})
    with pytest.raises(onnxc.RuntimeFailure, match="fewer features"):
        run_onnxc(m, {"x": np.zeros((2, 2), np.float32)})


def test_big_forest_compiles_fast():
    """A forest is data, not code: 200 trees of depth 8 compile in seconds."""
    rng = np.random.default_rng(11)
    a = random_trees(rng, 200, 8, 10, 3, modes=MODES[:4], weights_per_leaf=1)
    node = ml_node("TreeEnsembleClassifier", ["x"], ["y", "z"],
                   **classifier_attrs(a, [0, 1, 2], post_transform="SOFTMAX"))
    m = make_model([node], [("x", T.FLOAT, ["n", 10])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", 3])],
                   extra_opsets=ML3)
    start = time.perf_counter()
    sess = onnxc.InferenceSession(m)
    assert time.perf_counter() - start < 60
    x = features(np.float32, (64, 10), 2, 1.0)
    expected = run_ort(m, {"x": x})
    actual = sess.run(None, {"x": x})
    np.testing.assert_array_equal(actual[0], expected[0])
    close(actual[1], expected[1])


def test_tree_errors():
    a = random_trees(np.random.default_rng(1), 2, 2, 2, 2)
    strings = ml_node("TreeEnsembleClassifier", ["x"], ["y", "z"],
                      **{k: v for k, v in classifier_attrs(a, []).items() if k != "classlabels_int64s"},
                      classlabels_strings=["a", "b"])
    m = make_model([strings], [("x", T.FLOAT, ["n", 2])], [("y", T.STRING, ["n"]), ("z", T.FLOAT, ["n", 2])],
                   extra_opsets=ML3)
    for n in (1, 4):  # string class labels
        assert_matches_ort(m, {"x": features(np.float32, (n, 2), n)})
    cyclic = ml_node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=1, nodes_treeids=[0, 0, 0],
                     nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0], nodes_values=[0.0, 1.0, 0.0],
                     nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], nodes_truenodeids=[1, 0, 0],
                     nodes_falsenodeids=[2, 2, 0], target_treeids=[0], target_nodeids=[2], target_ids=[0],
                     target_weights=[1.0])
    m = make_model([cyclic], [("x", T.FLOAT, ["n", 1])], [("y", T.FLOAT, ["n", 1])], extra_opsets=ML3)
    with pytest.raises(onnxc.ModelError, match="cycle"):
        onnxc.InferenceSession(m)


def random_v5(rng, n_trees, depth, n_features, n_targets, dtype, member=False, cats=(0.0, 1.0, 2.0, 3.0, 4.0)):
    """TreeEnsemble (opset 5) attributes of random trees, with BRANCH_MEMBER nodes when ``member``."""
    a = {k: [] for k in ("feat", "split", "mode", "tid", "tleaf", "fid", "fleaf", "miss", "members", "target",
                         "weight", "roots")}

    def build(d):
        i = len(a["feat"])
        a["feat"].append(int(rng.integers(n_features)))
        if member and rng.random() < 0.5:
            a["mode"].append(6)
            a["split"].append(0.0)
            a["members"] += [float(v) for v in rng.choice(cats, size=int(rng.integers(1, 4)), replace=False)]
            a["members"].append(np.nan)
        else:
            a["mode"].append(int(rng.integers(0, 6)))
            a["split"].append(float(rng.choice(cats)) if member else float(rng.standard_normal()))
        a["miss"].append(int(rng.random() < 0.5))
        for ids, leafs in (("tid", "tleaf"), ("fid", "fleaf")):
            a[ids].append(0)
            a[leafs].append(0)
        for ids, leafs in (("tid", "tleaf"), ("fid", "fleaf")):
            if d + 1 >= depth or rng.random() < 0.25:
                a[ids][i], a[leafs][i] = len(a["weight"]), 1
                a["target"].append(int(rng.integers(n_targets)))
                a["weight"].append(float(rng.standard_normal()))
            else:
                a[ids][i] = build(d + 1)
        return i

    for _ in range(n_trees):
        a["roots"].append(build(0))
    attrs = {"n_targets": n_targets, "tree_roots": a["roots"], "nodes_featureids": a["feat"],
             "nodes_splits": numpy_helper.from_array(np.array(a["split"], dtype)),
             "nodes_modes": numpy_helper.from_array(np.array(a["mode"], np.uint8)),
             "nodes_truenodeids": a["tid"], "nodes_trueleafs": a["tleaf"], "nodes_falsenodeids": a["fid"],
             "nodes_falseleafs": a["fleaf"], "nodes_missing_value_tracks_true": a["miss"],
             "leaf_targetids": a["target"], "leaf_weights": numpy_helper.from_array(np.array(a["weight"], dtype))}
    if a["members"]:
        attrs["membership_values"] = numpy_helper.from_array(np.array(a["members"], dtype))
    return attrs


# onnxruntime reads post_transform 1 as LOGISTIC and 2 as SOFTMAX; the spec (and onnxc) says 1 SOFTMAX, 2 LOGISTIC.
ORT_TRANSFORM = {0: 0, 1: 2, 2: 1, 3: 3, 4: 4}


@pytest.mark.parametrize("aggregate, pt, targets, member, elem, npt",
                         [(agg, pt, 3, True, T.FLOAT, np.float32) for agg in range(4) for pt in range(5)]
                         + [(agg, pt, 1, False, T.FLOAT, np.float32) for agg in range(4) for pt in (0, 4)]
                         + [(agg, 2, 2, member, T.DOUBLE, np.float64) for agg in range(4) for member in (False, True)])
def test_tree_ensemble_v5(aggregate, pt, targets, member, elem, npt):
    rng = np.random.default_rng(aggregate * 100 + pt * 10 + targets + member)
    attrs = random_v5(rng, 4, 4, 3, targets, npt, member=member)

    def model(transform):
        node = ml_node("TreeEnsemble", ["x"], ["y"], aggregate_function=aggregate, post_transform=transform, **attrs)
        return make_model([node], [("x", elem, ["n", 3])], [("y", elem, ["n", targets])], extra_opsets=ML5)

    x = rng.integers(0, 5, (40, 3)).astype(npt) if member else rng.standard_normal((40, 3)).astype(npt)
    x[::7, 1] = np.nan
    close(run_onnxc(model(pt), {"x": x})[0], run_ort(model(ORT_TRANSFORM[pt]), {"x": x})[0])


def test_tree_ensemble_v5_single_leaf_tree():
    """A tree that is one leaf: a root whose branches reference the same leaf (the leaf at the root's index)."""
    attrs = {"n_targets": 1, "aggregate_function": 1, "tree_roots": [0, 1], "nodes_featureids": [0, 0],
             "nodes_splits": numpy_helper.from_array(np.array([0.5, 0.0], np.float32)),
             "nodes_modes": numpy_helper.from_array(np.array([0, 0], np.uint8)),
             "nodes_truenodeids": [2, 1], "nodes_trueleafs": [1, 1], "nodes_falsenodeids": [3, 1],
             "nodes_falseleafs": [1, 1], "leaf_targetids": [0, 0, 0, 0],
             "leaf_weights": numpy_helper.from_array(np.array([5, 7, 1, 2], np.float32))}
    m = make_model([ml_node("TreeEnsemble", ["x"], ["y"], **attrs)], [("x", T.FLOAT, ["n", 1])],
                   [("y", T.FLOAT, ["n", 1])], extra_opsets=ML5)
    x = np.array([[0.0], [1.0]], np.float32)
    assert_matches_ort(m, {"x": x})
    np.testing.assert_array_equal(run_onnxc(m, {"x": x})[0], [[8.0], [9.0]])


# --- SVMs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel, mode", [(k, "svc") for k in KERNEL_PARAMS] + [("LINEAR", "linear")])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel, mode, one_class):
    rng = np.random.default_rng(3)
    f, v = 4, 6
    attrs = {"kernel_type": kernel, "kernel_params": KERNEL_PARAMS[kernel], "rho": [0.3], "one_class": one_class}
    if mode == "svc":
        attrs.update(n_supports=v, support_vectors=f32(rng.standard_normal(v * f)),
                     coefficients=f32(rng.standard_normal(v)))
    else:
        attrs.update(coefficients=f32(rng.standard_normal(f)))
    m = make_model([ml_node("SVMRegressor", ["x"], ["y"], **attrs)], [("x", T.FLOAT, ["n", f])],
                   [("y", T.FLOAT, ["n", 1])], extra_opsets=ML1)
    assert_matches_ort(m, {"x": features(np.float32, (9, f), 1, 1.0)})


@pytest.mark.parametrize("kernel, classes, proba, pt",
                         [(k, c, p, "NONE") for k in KERNEL_PARAMS for c in (2, 4) for p in (False, True)]
                         + [("RBF", c, p, pt) for c in (2, 3) for p in (False, True) for pt in PTS[1:]])
def test_svm_classifier(kernel, classes, proba, pt):
    rng = np.random.default_rng(classes * 10 + proba)
    f = 3
    m = make_model([ml_node("SVMClassifier", ["x"], ["y", "z"], **svc_attrs(rng, kernel, classes, proba, pt, f))],
                   [("x", T.FLOAT, ["n", f])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", None])], extra_opsets=ML1)
    feeds = {"x": features(np.float32, (12, f), 2, 1.0)}
    actual, expected = run_onnxc(m, feeds), run_ort(m, feeds)
    np.testing.assert_array_equal(actual[0], expected[0])
    if classes == 2 and not proba and pt == "PROBIT":  # onnxruntime leaves the second column unset
        close(actual[1][:, 0], expected[1][:, 0])
    else:
        close(actual[1], expected[1])


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("pt", ["NONE", "LOGISTIC", "SOFTMAX", "PROBIT"])
@pytest.mark.parametrize("positive", [False, True])
def test_svm_classifier_linear(classes, pt, positive):
    rng = np.random.default_rng(classes)
    coef = rng.standard_normal(classes * 3)
    node = ml_node("SVMClassifier", ["x"], ["y", "z"], classlabels_ints=list(range(7, 7 + classes)),
                   coefficients=f32(np.abs(coef) * 0.3 if positive else coef), rho=[0.2], post_transform=pt,
                   kernel_params=[0.0, 0.0, 0.0])
    m = make_model([node], [("x", T.FLOAT, ["n", 3])], [("y", T.INT64, ["n"]), ("z", T.FLOAT, ["n", classes])],
                   extra_opsets=ML1)
    assert_matches_ort(m, {"x": features(np.float32, (12, 3), 3, 1.0)})


# --- scikit-learn models through skl2onnx --------------------------------------------------------

def _sklearn_cases():
    """Training data and, by name, (a factory of the model, its targets)."""
    require_module("sklearn")
    from sklearn import ensemble, linear_model, pipeline, preprocessing, svm, tree
    from sklearn.impute import SimpleImputer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 5)).astype(np.float32)
    y2 = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    y3 = np.digitize(x[:, 0] - x[:, 2], [-0.5, 0.5]).astype(np.int64)
    yr = (x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.1 * rng.standard_normal(120)).astype(np.float32)
    return x, {
        "logistic_binary": (lambda: linear_model.LogisticRegression(), y2),
        "logistic_multi": (lambda: linear_model.LogisticRegression(max_iter=500), y3),
        "linear_regression": (lambda: linear_model.LinearRegression(), yr),
        "ridge_two_targets": (lambda: linear_model.Ridge(), np.stack([yr, -yr], axis=1)),
        "decision_tree_classifier": (lambda: tree.DecisionTreeClassifier(max_depth=5, random_state=0), y3),
        "decision_tree_regressor": (lambda: tree.DecisionTreeRegressor(max_depth=6, random_state=0), yr),
        "random_forest_classifier": (
            lambda: ensemble.RandomForestClassifier(n_estimators=12, max_depth=5, random_state=0), y3),
        "random_forest_binary": (
            lambda: ensemble.RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0), y2),
        "random_forest_regressor": (
            lambda: ensemble.RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0), yr),
        "gradient_boosting_binary": (lambda: ensemble.GradientBoostingClassifier(n_estimators=15, random_state=0), y2),
        "gradient_boosting_multi": (lambda: ensemble.GradientBoostingClassifier(n_estimators=10, random_state=0), y3),
        "gradient_boosting_regressor": (
            lambda: ensemble.GradientBoostingRegressor(n_estimators=20, random_state=0), yr),
        "scaler_logistic": (
            lambda: pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression()), y3),
        "scaler_forest": (lambda: pipeline.make_pipeline(
            preprocessing.StandardScaler(), ensemble.RandomForestRegressor(n_estimators=5, random_state=0)), yr),
        "imputer_normalizer_svr": (
            lambda: pipeline.make_pipeline(SimpleImputer(), preprocessing.Normalizer(), svm.SVR()), yr),
        "svc_rbf": (lambda: svm.SVC(), y3),
        "svc_binary_proba": (lambda: svm.SVC(probability=True, random_state=0), y2),
        "svc_multi_proba": (lambda: svm.SVC(kernel="poly", degree=2, probability=True, random_state=0), y3),
        "linear_svc": (lambda: svm.LinearSVC(), y3),
        "svr_linear": (lambda: svm.SVR(kernel="linear"), yr),
    }


SKLEARN_CASES = ["logistic_binary", "logistic_multi", "linear_regression", "ridge_two_targets",
                 "decision_tree_classifier", "decision_tree_regressor", "random_forest_classifier",
                 "random_forest_binary", "random_forest_regressor", "gradient_boosting_binary",
                 "gradient_boosting_multi", "gradient_boosting_regressor", "scaler_logistic", "scaler_forest",
                 "imputer_normalizer_svr", "svc_rbf", "svc_binary_proba", "svc_multi_proba", "linear_svc", "svr_linear"]


@pytest.mark.parametrize("name", SKLEARN_CASES)
def test_sklearn_model(name):
    require_module("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.base import is_classifier
    x, cases = _sklearn_cases()
    factory, y = cases[name]
    try:
        model = factory()
    except TypeError as e:  # an option this scikit-learn no longer has (SVC's probability)
        pytest.skip(str(e))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y)
        try:
            onx = to_onnx(model, x[:1], options={id(model): {"zipmap": False}} if is_classifier(model) else None)
        except NameError:  # a classifier without probabilities has no zipmap option
            onx = to_onnx(model, x[:1])
    test_x = np.random.default_rng(1).standard_normal((33, 5)).astype(np.float32)
    if name.startswith("imputer"):
        test_x[::4, 2] = np.nan
    sess = onnxc.InferenceSession(onx.SerializeToString())
    expected = run_ort(onx, {"X": test_x})
    for n in (1, 33):  # the batch dim is symbolic
        actual = sess.run(None, {"X": test_x[:n]})
        for a, e in zip(actual, expected):
            if e.dtype.kind in "iu":
                np.testing.assert_array_equal(a, e[:n])
            else:
                close(a, e[:n], rtol=1e-4, atol=1e-4)
