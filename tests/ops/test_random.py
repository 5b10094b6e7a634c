"""Random operators (RandomNormal, RandomUniform, their *Like forms, Bernoulli, Multinomial) and
training-mode Dropout.

Draws cannot match onnxruntime's value by value (other generators), so the distributions are
tested with statistics: moments against bounds of 6 standard errors and chi-square tests at a
p-value of 1e-6, on fixed seeds, so each result is fixed (no flakes) and a biased generator
fails. What is deterministic (shapes, dtypes, Dropout's scaling, ratio 0) is compared with
onnxruntime, and the seed semantics are onnxruntime's: a seed attribute repeats its sequence in
every new session, each run draws anew, and without one the session's seed is set_seed's.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from scipy import stats

import onnxc
from helpers import make_model, run_ort
from onnxc.runtime import cuda, environment

P_MIN = 1e-6   # chi-square tests fail below this p-value


@pytest.fixture(autouse=True)
def no_global_seed(monkeypatch):
    """Each test starts as if set_seed was never called."""
    monkeypatch.setattr(environment, "_seed", None)


def session(model) -> onnxc.InferenceSession:
    return onnxc.InferenceSession(model.SerializeToString())


def generator(op, shape, opset=21, dtype=TP.FLOAT, **attrs):
    """A model of one RandomNormal or RandomUniform node: no inputs, output y."""
    node = helper.make_node(op, [], ["y"], shape=list(shape), dtype=dtype, **attrs)
    return make_model([node], [], [("y", dtype, list(shape))], opset=opset)


def like(op, x_type, x_shape, out_type=None, opset=21, **attrs):
    if out_type is not None:
        attrs["dtype"] = out_type
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    return make_model([node], [("x", x_type, list(x_shape))], [("y", out_type or x_type, list(x_shape))],
                      opset=opset)


def chi_square_p(counts, expected) -> float:
    counts, expected = np.asarray(counts, np.float64), np.asarray(expected, np.float64)
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    return float(stats.chi2.sf(statistic, len(counts) - 1))


# ---- distributions -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [TP.FLOAT, TP.DOUBLE])
def test_normal_moments_and_shape_of_the_distribution(dtype):
    n = 200_000
    y = session(generator("RandomNormal", (n,), dtype=dtype, mean=3.0, scale=2.0, seed=11.0)).run(None, {})[0]
    assert y.dtype == helper.tensor_dtype_to_np_dtype(dtype) and y.shape == (n,)
    z = (y.astype(np.float64) - 3.0) / 2.0
    assert abs(z.mean()) < 6 / np.sqrt(n)
    assert abs(z.var() - 1) < 6 * np.sqrt(2 / n)
    # the tails too: counts in 12 bins of equal normal probability
    edges = stats.norm.ppf(np.linspace(0, 1, 13)[1:-1])
    counts = np.bincount(np.searchsorted(edges, z), minlength=12)
    assert chi_square_p(counts, np.full(12, n / 12)) > P_MIN


@pytest.mark.parametrize("dtype", [TP.FLOAT, TP.DOUBLE])
def test_uniform_bins_and_range(dtype):
    n, bins = 200_000, 50
    y = session(generator("RandomUniform", (n,), dtype=dtype, low=-2.0, high=3.0, seed=5.0)).run(None, {})[0]
    assert y.min() >= -2.0 and y.max() < 3.0
    counts = np.histogram(y, bins=bins, range=(-2.0, 3.0))[0]
    assert chi_square_p(counts, np.full(bins, n / bins)) > P_MIN
    # neighbours are independent: pairs fall evenly into a 10 x 10 grid
    u = (y.astype(np.float64) + 2.0) / 5.0
    pairs = (np.minimum(u[0::2] * 10, 9).astype(int) * 10 + np.minimum(u[1::2] * 10, 9).astype(int))
    assert chi_square_p(np.bincount(pairs, minlength=100), np.full(100, n / 2 / 100)) > P_MIN


def test_a_biased_sample_fails_the_bin_test():
    """The chi-square test can fail: a sample a tenth of a bin off uniform does."""
    u = (np.arange(200_000) % 1000) / 1000.0
    counts = np.histogram(u ** 1.02, bins=50, range=(0.0, 1.0))[0]
    assert chi_square_p(counts, np.full(50, 4000)) < P_MIN


def test_bernoulli_frequencies_follow_the_probabilities():
    probs = np.array([0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
    reps = 20_000
    p = np.tile(probs, reps)
    model = make_model([helper.make_node("Bernoulli", ["p"], ["y"], seed=2.0)], [("p", TP.DOUBLE, [p.size])],
                       [("y", TP.DOUBLE, [p.size])], opset=22)
    y = session(model).run(None, {"p": p})[0].reshape(reps, probs.size)
    assert set(np.unique(y)) <= {0.0, 1.0}
    ones = y.sum(axis=0)
    assert ones[0] == 0 and ones[-1] == reps
    for q, k in zip(probs[1:-1], ones[1:-1]):
        assert chi_square_p([k, reps - k], [reps * q, reps * (1 - q)]) > P_MIN, (q, k)


@pytest.mark.parametrize("out_type", [TP.BOOL, TP.INT32, TP.FLOAT16])
def test_bernoulli_output_types_match_onnxruntime(out_type):
    p = np.full((3, 4), 0.5, np.float32)
    model = make_model([helper.make_node("Bernoulli", ["p"], ["y"], dtype=out_type)], [("p", TP.FLOAT, [3, 4])],
                       [("y", out_type, [3, 4])], opset=15)
    ours, ort = session(model).run(None, {"p": p})[0], run_ort(model, {"p": p})[0]
    assert ours.dtype == ort.dtype and ours.shape == ort.shape
    assert set(np.unique(ours.astype(np.float64))) <= {0.0, 1.0}


@pytest.mark.parametrize("out_type", [TP.INT32, TP.INT64])
def test_multinomial_counts_follow_softmax(out_type):
    with np.errstate(divide="ignore"):   # (a class of probability 0: logit -inf)
        logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.2, 0.1]], np.float32))
    samples = 40_000
    model = make_model([helper.make_node("Multinomial", ["x"], ["y"], sample_size=samples, dtype=out_type, seed=4.0)],
                       [("x", TP.FLOAT, [2, 4])], [("y", out_type, [2, samples])], opset=7)
    y = session(model).run(None, {"x": logits})[0]
    ort = run_ort(model, {"x": logits})[0]
    assert y.dtype == ort.dtype and y.shape == ort.shape == (2, samples)
    for row, probs in zip(y, np.exp(logits)):
        counts = np.bincount(row, minlength=4)
        assert counts[probs == 0].sum() == 0   # a class of probability 0 is never drawn
        seen = probs > 0
        assert chi_square_p(counts[seen], samples * probs[seen] / probs.sum()) > P_MIN


def test_multinomial_refuses_a_row_without_probability():
    model = make_model([helper.make_node("Multinomial", ["x"], ["y"], sample_size=2)], [("x", TP.FLOAT, [1, 3])],
                       [("y", TP.INT32, [1, 2])], opset=22)
    with pytest.raises(Exception, match="no class has a finite nonzero probability"):
        session(model).run(None, {"x": np.full((1, 3), -np.inf, np.float32)})


# ---- dtypes and shapes --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [TP.FLOAT16, TP.FLOAT, TP.DOUBLE])
@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_generator_dtypes_and_shapes_match_onnxruntime(op, dtype):
    shape = (2, 0, 3) if dtype == TP.DOUBLE else (4, 5, 3)
    model = generator(op, shape, dtype=dtype, seed=1.0)
    ours = session(model).run(None, {})[0]
    assert ours.dtype == helper.tensor_dtype_to_np_dtype(dtype) and ours.shape == shape
    assert np.all(np.isfinite(ours))
    if dtype != TP.FLOAT16:   # (onnxruntime has no float16 kernel of these)
        ort = run_ort(model, {})[0]
        assert ours.dtype == ort.dtype and ours.shape == ort.shape


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_like_forms_take_the_input_shape_and_type_or_dtype(op):
    x = np.zeros((3, 7), np.int64)
    model = like(op, TP.INT64, x.shape, out_type=TP.DOUBLE)
    ours, ort = session(model).run(None, {"x": x})[0], run_ort(model, {"x": x})[0]
    assert ours.dtype == ort.dtype == np.float64 and ours.shape == ort.shape == x.shape
    h = np.zeros((2, 5), np.float16)
    ours = session(like(op, TP.FLOAT16, h.shape)).run(None, {"x": h})[0]
    assert ours.dtype == np.float16 and ours.shape == h.shape and np.unique(ours).size > 1


def test_like_forms_follow_a_symbolic_shape():
    model = like("RandomUniformLike", TP.FLOAT, ["N", 4], low=1.0, high=2.0)
    sess = session(model)
    for n in (1, 6):
        y = sess.run(None, {"x": np.zeros((n, 4), np.float32)})[0]
        assert y.shape == (n, 4) and np.all((y >= 1) & (y < 2))


def test_bfloat16_from_opset_22():
    model = generator("RandomNormal", (1000,), opset=22, dtype=TP.BFLOAT16, seed=3.0)
    y = session(model).run(None, {})[0].astype(np.float32)
    assert abs(y.mean()) < 0.25 and 0.8 < y.std() < 1.2


def test_a_float_type_the_version_lacks_is_refused():
    with pytest.raises(Exception, match="bfloat16"):
        session(generator("RandomUniform", (3,), opset=21, dtype=TP.BFLOAT16))


# ---- seeds and runs -----------------------------------------------------------------------------

def runs(sess, count=3, feeds=None):
    return [sess.run(None, feeds or {})[0].copy() for _ in range(count)]


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_a_seed_repeats_its_sequence_in_a_new_session_and_runs_differ(op):
    model = generator(op, (64,), seed=7.0)
    first, again = runs(session(model)), runs(session(model))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    other = runs(session(generator(op, (64,), seed=8.0)), 1)[0]
    assert not np.array_equal(first[0], other)


def test_without_a_seed_sessions_draw_differently():
    model = generator("RandomNormal", (64,))
    a, b = runs(session(model), 2), runs(session(model), 2)
    assert not np.array_equal(a[0], b[0]) and not np.array_equal(a[1], b[1])


def test_set_seed_seeds_the_sessions_made_after_it():
    model = generator("RandomUniform", (64,))
    onnxc.set_seed(123)
    a, b = runs(session(model)), runs(session(model))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    onnxc.set_seed(124)
    assert not np.array_equal(runs(session(model), 1)[0], a[0])


def test_two_unseeded_nodes_draw_independently():
    nodes = [helper.make_node("RandomUniform", [], [name], shape=[32]) for name in ("a", "b")]
    model = make_model(nodes, [], [("a", TP.FLOAT, [32]), ("b", TP.FLOAT, [32])], opset=21)
    a, b = session(model).run(None, {})
    assert not np.array_equal(a, b)


def test_runs_are_numbered_across_both_run_paths():
    """A run with RunOptions takes another context than a plain run: the stream still advances
    once per run, as a new session's plain runs show."""
    model = generator("RandomNormal", (16,), seed=1.0)
    plain = runs(session(model))
    sess = session(model)
    mixed = [sess.run(None, {})[0], sess.run(None, {}, onnxc.RunOptions())[0], sess.run(None, {})[0]]
    for a, b in zip(plain, mixed):
        np.testing.assert_array_equal(a, b)


def test_concurrent_runs_never_draw_the_same_numbers():
    model = generator("RandomUniform", (256,), seed=9.0)
    sess = session(model)
    results: list[np.ndarray] = []

    def work():
        for _ in range(10):
            results.append(sess.run(None, {})[0].copy())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.tobytes() for r in results}) == 40
    # the 40 runs drew what a session's first 40 runs draw, in some order
    serial = {r.tobytes() for r in runs(session(model), 40)}
    assert {r.tobytes() for r in results} == serial


def test_a_node_in_a_loop_body_draws_anew_each_iteration():
    body = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["u"], shape=[8], seed=2.0),
         helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Add", ["s", "i"], ["s_out"])],
        "body", [helper.make_tensor_value_info("i", TP.INT64, []), helper.make_tensor_value_info("cond", TP.BOOL, []),
                 helper.make_tensor_value_info("s", TP.INT64, [])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []), helper.make_tensor_value_info("s_out", TP.INT64, []),
         helper.make_tensor_value_info("u", TP.FLOAT, [8])])
    loop = helper.make_node("Loop", ["n", "", "s0"], ["s_final", "us"], body=body)
    model = make_model([loop], [("n", TP.INT64, []), ("s0", TP.INT64, [])],
                       [("s_final", TP.INT64, []), ("us", TP.FLOAT, [None, 8])], opset=21)
    sess = session(model)
    feeds = {"n": np.array(3, np.int64), "s0": np.array(0, np.int64)}
    us = sess.run(None, feeds)[1]
    assert us.shape == (3, 8) and len({row.tobytes() for row in us}) == 3
    assert not np.array_equal(sess.run(None, feeds)[1], us)   # and the next run draws anew


# ---- Dropout ------------------------------------------------------------------------------------

def dropout(x_type=TP.FLOAT, shape=(4000,), opset=13, with_mask=True, **attrs):
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"] if with_mask else ["y"], **attrs)
    outputs = [("y", x_type, list(shape))] + ([("mask", TP.BOOL, list(shape))] if with_mask else [])
    return make_model([node], [("x", x_type, list(shape)), ("r", TP.FLOAT, []), ("t", TP.BOOL, [])], outputs,
                      opset=opset)


def dropout_feeds(x, ratio, training=True):
    return {"x": x, "r": np.array(ratio, np.float32), "t": np.array(training)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_training_dropout_mask_matches_output(dtype):
    x = np.random.default_rng(0).standard_normal(4000).astype(dtype)
    ratio = 0.3
    model = dropout(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), seed=5)
    y, mask = session(model).run(None, dropout_feeds(x, ratio))
    assert mask.dtype == np.bool_ and y.dtype == dtype
    keep_share = np.float32(1) - np.float32(ratio)   # in float, as onnxruntime computes it
    compute = np.float64 if dtype == np.float64 else np.float32   # float16 computes in float
    np.testing.assert_array_equal(y, (x.astype(compute) * mask / keep_share).astype(dtype))
    kept = int(mask.sum())
    assert chi_square_p([kept, x.size - kept], [x.size * (1 - ratio), x.size * ratio]) > P_MIN


def test_training_dropout_scales_kept_elements_as_onnxruntime_does():
    x = np.random.default_rng(1).standard_normal(4000).astype(np.float32)
    feeds = dropout_feeds(x, 0.37)
    model = dropout()
    y, mask = session(model).run(None, feeds)
    y_ort, mask_ort = run_ort(model, feeds)
    both = mask & mask_ort
    assert both.sum() > 1000
    np.testing.assert_array_equal(y[both], y_ort[both])
    assert np.all(y[~mask] == 0) and np.all(y_ort[~mask_ort] == 0)


@pytest.mark.parametrize("ratio, training", [(0.0, True), (0.5, False)])
def test_dropout_that_keeps_everything_matches_onnxruntime(ratio, training):
    x = np.random.default_rng(2).standard_normal(4000).astype(np.float32)
    model = dropout()
    ours, ort = session(model).run(None, dropout_feeds(x, ratio, training)), run_ort(model, dropout_feeds(x, ratio, training))
    for a, b in zip(ours, ort):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours[0], x)


def test_dropout_seed_repeats_and_runs_differ():
    x = np.ones(512, np.float32)
    model = dropout(shape=(512,), seed=3)
    a, b = runs(session(model), 2, dropout_feeds(x, 0.5)), runs(session(model), 2, dropout_feeds(x, 0.5))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], a[1])


def test_dropout_ratio_must_be_below_one_in_training():
    with pytest.raises(Exception, match=r"ratio must be in \[0, 1\)"):
        session(dropout()).run(None, dropout_feeds(np.ones(4000, np.float32), 1.0))


def test_old_dropout_trains_when_is_test_is_0():
    x = np.ones((1000,), np.float32)
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.25)
    model = make_model([node], [("x", TP.FLOAT, [1000])], [("y", TP.FLOAT, [1000]), ("mask", TP.FLOAT, [1000])],
                       opset=6)
    y, mask = session(model).run(None, {"x": x})
    assert set(np.unique(mask)) == {0.0, 1.0}
    np.testing.assert_array_equal(y, mask / np.float32(0.75))


# ---- other builds -------------------------------------------------------------------------------

@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def test_cuda_build_refuses_random_ops_and_the_session_runs_on_the_cpu(emulated):
    model = generator("RandomNormal", (8,), seed=1.0)
    with pytest.warns(UserWarning, match="cannot draw random numbers"):
        sess = onnxc.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_array_equal(sess.run(None, {})[0], session(model).run(None, {})[0])


def test_c_package_keeps_the_generator_in_the_callers_arena(tmp_path):
    """``--target c``: the state lives in the arena's context; the demo program's draws are the
    draws of a session's first run with the same seed attribute."""
    from test_embedded import make, package, run_demo, write_inputs
    model = like("RandomUniformLike", TP.FLOAT, (6,), low=-1.0, high=1.0, seed=4.0)
    x = np.zeros(6, np.float32)
    folder = package(tmp_path, model, "rnd")
    with open(f"{folder}/rnd.h") as f:   # (a package's files are named after its prefix)
        assert "void rnd_seed(void *arena, uint64_t seed);" in f.read()
    make(folder)
    drawn = run_demo(folder, "rnd", write_inputs(folder, {"x": x}))[0]
    np.testing.assert_allclose(drawn, session(model).run(None, {"x": x})[0], rtol=1e-6)
