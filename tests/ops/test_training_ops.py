"""Training optimizers of ai.onnx.preview.training (Adagrad, Adam, Momentum) against the ONNX
reference evaluator and a numpy re-implementation of the spec's pseudo code.

onnxruntime does not implement these ops, so nothing here compares with it."""
import numpy as np
import pytest
from helpers import make_model, run_onnxc
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc

DOMAIN = "ai.onnx.preview.training"
F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
NP = {F: np.float32, D: np.float64}
rng = np.random.default_rng(0)

# op -> (names of the input groups after R and T, names of the output groups)
GROUPS = {
    "Adagrad": (("X", "G", "H"), ("X_new", "H_new")),
    "Adam": (("X", "G", "V", "H"), ("X_new", "V_new", "H_new")),
    "Momentum": (("X", "G", "V"), ("X_new", "V_new")),
}


# --- the spec's pseudo code, in float64 ------------------------------------------------------

def f32(v):
    """An attribute value as the model stores it (float32)."""
    return float(np.float32(v))


# The schema's defaults, as float32.
EPSILON, ALPHA, BETA = f32(1e-6), f32(0.9), f32(0.999)


def np_adagrad(r, t, x, g, h, norm_coefficient=0.0, decay_factor=0.0, epsilon=EPSILON):
    r = r / (1 + t * decay_factor)
    g = norm_coefficient * x + g
    h_new = h + g * g
    return x - r * g / (np.sqrt(h_new) + epsilon), h_new


def np_adam(r, t, x, g, v, h, norm_coefficient=0.0, norm_coefficient_post=0.0, alpha=ALPHA,
            beta=BETA, epsilon=EPSILON):
    g = norm_coefficient * x + g
    v_new = alpha * v + (1 - alpha) * g
    h_new = beta * h + (1 - beta) * g * g
    r = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    x_new = x - r * v_new / (np.sqrt(h_new) + epsilon)
    return (1 - norm_coefficient_post) * x_new, v_new, h_new


def np_momentum(r, t, x, g, v, norm_coefficient, alpha, beta, mode):
    g = norm_coefficient * x + g
    v_new = alpha * v + (beta if t > 0 else 1) * g
    if mode == "nesterov":
        return x - r * (g + alpha * v_new), v_new
    return x - r * v_new, v_new


NUMPY = {"Adagrad": np_adagrad, "Adam": np_adam, "Momentum": np_momentum}


# --- models and feeds --------------------------------------------------------------------------

def optimizer_model(op, shapes, elem=F, r_elem=None, **attrs):
    """One optimizer node over len(shapes) tensors; shapes may hold symbolic dims."""
    ins, outs = GROUPS[op]
    in_names = ["R", "T"] + [f"{g}{i}" for g in ins for i in range(len(shapes))]
    out_names = [f"{g}{i}" for g in outs for i in range(len(shapes))]
    node = helper.make_node(op, in_names, out_names, domain=DOMAIN, **attrs)
    inputs = [("R", r_elem or elem, []), ("T", I64, [])] + [
        (f"{g}{i}", elem, s) for g in ins for i, s in enumerate(shapes)]
    outputs = [(f"{g}{i}", elem, s) for g in outs for i, s in enumerate(shapes)]
    return make_model([node], inputs, outputs, extra_opsets={DOMAIN: 1})


def optimizer_feeds(op, shapes, elem=F, r_elem=None, t=0, r=0.1):
    """Random tensors of static ``shapes``; accumulated squared gradients are non-negative."""
    ins, _ = GROUPS[op]
    dtype = NP[elem]
    feeds = {"R": np.array(r, dtype=NP[r_elem or elem]), "T": np.array(t, dtype=np.int64)}
    for g in ins:
        for i, s in enumerate(shapes):
            a = rng.random(s) if g == "H" else rng.standard_normal(s)
            feeds[f"{g}{i}"] = np.asarray(a, dtype=dtype)
    return feeds


def expected_numpy(op, feeds, n, attrs):
    ins, outs = GROUPS[op]
    r, t = float(feeds["R"]), int(feeds["T"])
    attrs = {k: f32(v) if isinstance(v, float) else v for k, v in attrs.items()}
    per_tensor = [NUMPY[op](r, t, *[feeds[f"{g}{i}"].astype(np.float64) for g in ins], **attrs)
                  for i in range(n)]
    return [per_tensor[i][j] for j in range(len(outs)) for i in range(n)]


def check(op, shapes, elem=F, r_elem=None, t=0, r=0.1, **attrs):
    """onnxc vs the reference evaluator and vs the numpy pseudo code."""
    model = optimizer_model(op, shapes, elem, r_elem, **attrs)
    feeds = optimizer_feeds(op, shapes, elem, r_elem, t, r)
    actual = run_onnxc(model, feeds)
    dtype = NP[elem]
    rtol, atol = (2e-5, 1e-6) if elem == F else (1e-12, 1e-14)
    ref = ReferenceEvaluator(model).run(None, feeds)
    mine = expected_numpy(op, feeds, len(shapes), attrs)
    assert len(actual) == len(ref) == len(mine)
    for i, (a, e, m) in enumerate(zip(actual, ref, mine)):
        assert a.dtype == dtype, f"output {i}: dtype {a.dtype}"
        assert a.shape == np.shape(e) == m.shape, f"output {i}: shape {a.shape}"
        # The reference evaluator casts Adam's outputs to float32 when it updates several tensors.
        ref_rtol = 2e-5 if np.asarray(e).dtype == np.float32 else rtol
        np.testing.assert_allclose(a, np.asarray(e).astype(dtype), rtol=ref_rtol, atol=atol,
                                   err_msg=f"output {i} vs reference")
        np.testing.assert_allclose(a.astype(np.float64), m, rtol=rtol, atol=atol, err_msg=f"output {i} vs numpy")
    return actual


SHAPES = [[[5]], [[3, 4], [7]], [[2, 3, 2], [], [1, 6]]]


@pytest.mark.parametrize("shapes", SHAPES, ids=["one", "two", "three"])
@pytest.mark.parametrize("elem", [F, D], ids=["float", "double"])
@pytest.mark.parametrize("t", [0, 3])
def test_adagrad(shapes, elem, t):
    check("Adagrad", shapes, elem=elem, t=t, norm_coefficient=0.01, decay_factor=0.1, epsilon=1e-5)


def test_adagrad_defaults():
    check("Adagrad", [[4, 4]], t=7)


@pytest.mark.parametrize("shapes", SHAPES, ids=["one", "two", "three"])
@pytest.mark.parametrize("elem", [F, D], ids=["float", "double"])
@pytest.mark.parametrize("t", [0, 1, 5])
def test_adam(shapes, elem, t):
    check("Adam", shapes, elem=elem, t=t, norm_coefficient=0.001, alpha=0.95, beta=0.85, epsilon=1e-2)


@pytest.mark.parametrize("t", [0, 4])
def test_adam_post_regularization_and_defaults(t):
    check("Adam", [[3, 5], [2]], t=t, norm_coefficient_post=0.05)
    check("Adam", [[6]], t=t)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("shapes", SHAPES, ids=["one", "two", "three"])
@pytest.mark.parametrize("elem", [F, D], ids=["float", "double"])
@pytest.mark.parametrize("t", [0, 2])
def test_momentum(mode, shapes, elem, t):
    check("Momentum", shapes, elem=elem, t=t, norm_coefficient=0.01, alpha=0.9, beta=0.3, mode=mode)


def test_learning_rate_of_another_type():
    """R may be double while the tensors are float, and the other way round."""
    check("Adagrad", [[4], [2, 2]], elem=F, r_elem=D, t=2, decay_factor=0.5)
    check("Adam", [[3]], elem=D, r_elem=F, t=2)
    check("Momentum", [[5]], elem=D, r_elem=F, t=1, norm_coefficient=0.0, alpha=0.5, beta=0.5, mode="standard")


@pytest.mark.parametrize("op", ["Adagrad", "Adam", "Momentum"])
def test_symbolic_dims(op):
    attrs = {"norm_coefficient": 0.0, "alpha": 0.8, "beta": 0.7, "mode": "nesterov"} if op == "Momentum" else {}
    model = optimizer_model(op, [["N", 3], ["M"]], **attrs)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n, m in ((2, 5), (4, 1), (0, 3)):
        feeds = optimizer_feeds(op, [[n, 3], [m]], t=1)
        actual = sess.run(None, feeds)
        expected = ReferenceEvaluator(model).run(None, feeds)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=2e-5, atol=1e-6)


def test_symbolic_shape_mismatch_fails_at_run_time():
    model = _node_model("Adagrad", ["R", "T", "X", "G", "H"], ["Y", "Z"], shapes={"X": ["N"], "G": ["M"], "H": ["N"]})
    sess = onnxc.InferenceSession(model.SerializeToString())
    feeds = {"R": np.array(0.1, dtype=np.float32), "T": np.array(0, dtype=np.int64),
             "X": np.ones(4, dtype=np.float32), "G": np.ones(3, dtype=np.float32), "H": np.ones(4, dtype=np.float32)}
    with pytest.raises(onnxc.RuntimeFailure):
        sess.run(None, feeds)


def _node_model(op, inputs, outputs, elem=F, shapes=None, **attrs):
    shapes = shapes or {}
    node = helper.make_node(op, inputs, outputs, domain=DOMAIN, **attrs)
    ins = [("R", elem, []), ("T", I64, [])] + [(n, elem, shapes.get(n, [3])) for n in inputs[2:]]
    return make_model([node], ins, [(n, elem, [3]) for n in outputs], extra_opsets={DOMAIN: 1})


@pytest.mark.parametrize("op, inputs, outputs", [
    ("Adagrad", ["R", "T", "X", "G"], ["Y"]),                    # not a whole number of groups
    ("Adagrad", ["R", "T", "X", "G", "H"], ["Y"]),               # too few outputs
    ("Adagrad", ["R", "T", "X", "G", "H"], ["Y", "Z", "W"]),     # too many outputs
    ("Adam", ["R", "T", "X1", "X2", "G1", "G2", "H1", "H2"], ["Y1", "Y2", "Z1", "Z2", "W1", "W2"]),  # 6 is not 4 groups
])
def test_bad_tensor_counts(op, inputs, outputs):
    with pytest.raises(onnxc.ModelError):
        run_onnxc(_node_model(op, inputs, outputs), {})


def test_bad_shapes_and_types():
    with pytest.raises(onnxc.ModelError):
        run_onnxc(_node_model("Adagrad", ["R", "T", "X", "G", "H"], ["Y", "Z"], shapes={"G": [4]}), {})
    with pytest.raises(onnxc.ModelError):
        run_onnxc(_node_model("Adagrad", ["R", "T", "X", "G", "H"], ["Y", "Z"], shapes={"G": [3, 1]}), {})
    with pytest.raises(onnxc.ModelError):
        run_onnxc(_node_model("Adagrad", ["R", "T", "X", "G", "H"], ["Y", "Z"], elem=TensorProto.FLOAT16), {})


def test_bad_momentum_mode():
    with pytest.raises(onnxc.ModelError):
        run_onnxc(_node_model("Momentum", ["R", "T", "X", "G", "V"], ["Y", "W"], norm_coefficient=0.0,
                              alpha=0.9, beta=0.1, mode="heavy-ball"), {})
