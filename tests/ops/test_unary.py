"""Unary elementwise ops (Exp, Sigmoid, LeakyRelu, Clip, PRelu, ...) against onnxruntime.

Many ops share one model (one compile) per dtype to keep the file fast.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort

# (op, attributes, low, high): ops on float tensors and the range of their random inputs.
FLOAT_OPS = [
    ("Abs", {}, -4, 4), ("Neg", {}, -4, 4), ("Exp", {}, -4, 4), ("Log", {}, 0.1, 4), ("Sqrt", {}, 0, 4),
    ("Reciprocal", {}, 0.5, 4), ("Floor", {}, -4, 4), ("Ceil", {}, -4, 4), ("Round", {}, -4, 4),
    ("Sign", {}, -4, 4), ("Sin", {}, -4, 4), ("Cos", {}, -4, 4), ("Tan", {}, -1.2, 1.2),
    ("Asin", {}, -0.99, 0.99), ("Acos", {}, -0.99, 0.99), ("Atan", {}, -4, 4), ("Sinh", {}, -3, 3),
    ("Cosh", {}, -3, 3), ("Asinh", {}, -4, 4), ("Acosh", {}, 1, 4), ("Atanh", {}, -0.95, 0.95),
    ("Tanh", {}, -4, 4), ("Sigmoid", {}, -10, 10), ("Erf", {}, -3, 3), ("Relu", {}, -4, 4),
    ("LeakyRelu", {}, -4, 4), ("LeakyRelu", {"alpha": 0.2}, -4, 4), ("Elu", {}, -4, 4),
    ("Elu", {"alpha": 0.5}, -4, 4), ("Selu", {}, -4, 4), ("Selu", {"alpha": 1.5, "gamma": 2.0}, -4, 4),
    ("Celu", {}, -4, 4), ("Celu", {"alpha": 2.0}, -4, 4), ("HardSigmoid", {}, -6, 6),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, -6, 6), ("HardSwish", {}, -6, 6), ("Softplus", {}, -10, 10),
    ("Softsign", {}, -4, 4), ("Mish", {}, -6, 6), ("ThresholdedRelu", {}, -4, 4),
    ("ThresholdedRelu", {"alpha": 0.7}, -4, 4), ("Shrink", {}, -4, 4), ("Shrink", {"lambd": 1.0, "bias": 0.3}, -4, 4),
    ("Gelu", {}, -4, 4), ("Gelu", {"approximate": "tanh"}, -4, 4), ("IsNaN", {}, -4, 4), ("IsInf", {}, -4, 4),
]
BOOL_OUT = ("IsNaN", "IsInf")
FLOAT_TYPES = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16,
               TP.BFLOAT16: ml_dtypes.bfloat16}


def _float_ops_model(ops, elem: int, shape) -> tuple:
    nodes, inputs, outputs = [], [], []
    for i, (op, attrs, _, _) in enumerate(ops):
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y{i}"], **attrs))
        inputs.append((f"x{i}", elem, shape))
        outputs.append((f"y{i}", TP.BOOL if op in BOOL_OUT else elem, shape))
    return make_model(nodes, inputs, outputs, opset=22)


def _float_feeds(ops, np_type, shape, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {f"x{i}": rng.uniform(lo, hi, shape).astype(np.float32).astype(np_type)
            for i, (_, _, lo, hi) in enumerate(ops)}


def _check(ops, actual, expected, rtol, atol) -> None:
    for (op, attrs, _, _), a, e in zip(ops, actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, f"{op} {attrs}: {a.dtype}{a.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=f"{op} {attrs}")


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16], ids=["float", "float16"])
def test_float_ops_match_onnxruntime(elem):
    ops = [o for o in FLOAT_OPS if not (elem == TP.FLOAT16 and o[0] == "Celu")]  # no float16 Celu in ort
    shape = [3, 4, 5]
    feeds = _float_feeds(ops, FLOAT_TYPES[elem], shape)
    model = _float_ops_model(ops, elem, shape)
    tol = 1e-5 if elem == TP.FLOAT else 1e-3
    _check(ops, run_onnxc(model, feeds), run_ort(model, feeds), rtol=tol, atol=tol)


@pytest.mark.parametrize("elem", [TP.DOUBLE, TP.BFLOAT16], ids=["double", "bfloat16"])
def test_float_ops_wide_and_narrow_types(elem):
    """onnxruntime lacks most of these kernels: its float32 results on the same values are the oracle."""
    ops = [o for o in FLOAT_OPS if not (elem == TP.BFLOAT16 and o[0] == "Shrink")]  # no bfloat16 in the spec
    np_type = FLOAT_TYPES[elem]
    shape = [2, 7]
    feeds = _float_feeds(ops, np_type, shape, seed=1)
    actual = run_onnxc(_float_ops_model(ops, elem, shape), feeds)
    expected = run_ort(_float_ops_model(ops, TP.FLOAT, shape), {k: v.astype(np.float32) for k, v in feeds.items()})
    expected = [e if e.dtype == np.bool_ else e.astype(np_type) for e in expected]
    tol = 1e-5 if elem == TP.DOUBLE else 1e-2
    _check(ops, actual, expected, rtol=tol, atol=tol)


def test_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e30, -1e30, 100.0, -100.0],
                 dtype=np.float32)
    ops = [("IsNaN", {}), ("IsInf", {}), ("IsInf", {"detect_negative": 0}), ("IsInf", {"detect_positive": 0}),
           ("IsInf", {"detect_positive": 0, "detect_negative": 0}), ("Round", {}), ("Sign", {}), ("Abs", {}),
           ("Sigmoid", {}), ("Softplus", {}), ("Mish", {}), ("Softsign", {}), ("Exp", {}), ("Neg", {}),
           ("Floor", {}), ("Ceil", {}), ("Tanh", {})]
    nodes = [helper.make_node(op, ["x"], [f"y{i}"], **attrs) for i, (op, attrs) in enumerate(ops)]
    outputs = [(f"y{i}", TP.BOOL if op in BOOL_OUT else TP.FLOAT, [x.size]) for i, (op, _) in enumerate(ops)]
    # atol: Mish(-100) is a denormal that onnxruntime flushes to zero
    assert_matches_ort(make_model(nodes, [("x", TP.FLOAT, [x.size])], outputs), {"x": x}, rtol=1e-6, atol=1e-38)


def test_round_halves_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, 3.5000002], dtype=np.float32)
    model = make_model([helper.make_node("Round", ["x"], ["y"])], [("x", TP.FLOAT, [8])], [("y", TP.FLOAT, [8])])
    y, = run_onnxc(model, {"x": x})
    np.testing.assert_array_equal(y, np.array([0, 2, 2, -0.0, -2, -2, 2, 4], dtype=np.float32))


INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
INT_ELEM = {np.int8: TP.INT8, np.int16: TP.INT16, np.int32: TP.INT32, np.int64: TP.INT64, np.uint8: TP.UINT8,
            np.uint16: TP.UINT16, np.uint32: TP.UINT32, np.uint64: TP.UINT64}


@pytest.mark.parametrize("np_type", INT_TYPES, ids=lambda t: t.__name__)
def test_integer_ops_wrap_like_numpy(np_type):
    info = np.iinfo(np_type)
    x = np.array([info.min, info.min + 1, -3, -1, 0, 1, 7, info.max - 1, info.max], dtype=object)
    x = x[(x >= info.min) & (x <= info.max)].astype(np_type)
    signed = info.min < 0
    lo, hi = np.array(-2 if signed else 1, np_type), np.array(5, np_type)
    elem = INT_ELEM[np_type]
    ops = [("Abs", ["x"], np.abs(x)), ("Sign", ["x"], np.sign(x)), ("BitwiseNot", ["x"], np.invert(x)),
           ("Clip", ["x", "lo", "hi"], np.minimum(np.maximum(x, lo), hi)),
           ("Clip", ["x", "", "hi"], np.minimum(x, hi)), ("Clip", ["x", "hi", "lo"], np.full_like(x, lo))]
    if signed:
        ops += [("Neg", ["x"], np.negative(x)), ("Relu", ["x"], np.maximum(x, 0))]
    nodes = [helper.make_node(op, ins, [f"y{i}"]) for i, (op, ins, _) in enumerate(ops)]
    model = make_model(nodes, [("x", elem, [x.size]), ("lo", elem, []), ("hi", elem, [])],
                       [(f"y{i}", elem, [x.size]) for i in range(len(ops))])
    with np.errstate(over="ignore"):
        for (op, _, expected), actual in zip(ops, run_onnxc(model, {"x": x, "lo": lo, "hi": hi})):
            np.testing.assert_array_equal(actual, expected.astype(np_type), err_msg=op)


@pytest.mark.parametrize("elem", [TP.INT32, TP.INT64, TP.UINT8], ids=["int32", "int64", "uint8"])
def test_integer_ops_match_onnxruntime(elem):
    np_type = {TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8}[elem]
    x = np.random.default_rng(2).integers(0 if elem == TP.UINT8 else -20, 20, (4, 6)).astype(np_type)
    nodes = [helper.make_node("Abs", ["x"], ["abs"]), helper.make_node("Sign", ["x"], ["sign"]),
             helper.make_node("Shrink", ["x"], ["shrink"], lambd=1.5, bias=2.0),
             helper.make_node("Shrink", ["x"], ["shrink_soft"], lambd=3.0, bias=3.0),
             helper.make_node("Clip", ["x", "lo", "hi"], ["clip"])]
    outs = ["abs", "sign", "shrink", "shrink_soft", "clip"]
    if elem != TP.UINT8:
        nodes += [helper.make_node("Neg", ["x"], ["neg"]), helper.make_node("BitwiseNot", ["x"], ["not"])]
        outs += ["neg", "not"]
    inits = [numpy_helper.from_array(np.array(v, np_type), n) for n, v in (("lo", 3), ("hi", 12))]
    model = make_model(nodes, [("x", elem, [4, 6])], [(o, elem, [4, 6]) for o in outs], initializers=inits)
    assert_matches_ort(model, {"x": x})


def test_shrink_integer_results_saturate():
    x = np.array([-128, -100, 0, 100, 127], dtype=np.int8)
    model = make_model([helper.make_node("Shrink", ["x"], ["y"], lambd=0.5, bias=-100.0)],
                       [("x", TP.INT8, [5])], [("y", TP.INT8, [5])])
    y, = run_onnxc(model, {"x": x})
    np.testing.assert_array_equal(y, np.array([-128, -128, 0, 127, 127], dtype=np.int8))


def test_not():
    x = np.random.default_rng(3).integers(0, 2, (2, 3, 4)).astype(np.bool_)
    model = make_model([helper.make_node("Not", ["x"], ["y"])], [("x", TP.BOOL, [2, 3, 4])],
                       [("y", TP.BOOL, [2, 3, 4])])
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("alpha", [None, 1.5])
def test_swish(alpha):
    attrs = {} if alpha is None else {"alpha": alpha}
    x = np.random.default_rng(4).uniform(-6, 6, (3, 5)).astype(np.float32)
    model = make_model([helper.make_node("Swish", ["x"], ["y"], **attrs)], [("x", TP.FLOAT, [3, 5])],
                       [("y", TP.FLOAT, [3, 5])], opset=24)
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE], ids=["float", "float16", "double"])
def test_clip_input_form(elem):
    np_type = FLOAT_TYPES[elem]
    x = np.random.default_rng(5).uniform(-3, 3, (3, 4)).astype(np_type)
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["both"]),
             helper.make_node("Clip", ["x", "lo"], ["min_only"]),
             helper.make_node("Clip", ["x", "", "hi"], ["max_only"]),
             helper.make_node("Clip", ["x"], ["neither"]),
             helper.make_node("Clip", ["x", "hi", "lo"], ["min_above_max"]),
             helper.make_node("Clip", ["x", "c_lo", "c_hi"], ["constant_bounds"])]
    inits = [numpy_helper.from_array(np.array(-0.25, np_type), "c_lo"),
             numpy_helper.from_array(np.array(0.75, np_type), "c_hi")]
    outs = ["both", "min_only", "max_only", "neither", "min_above_max", "constant_bounds"]
    model = make_model(nodes, [("x", elem, [3, 4]), ("lo", elem, []), ("hi", elem, [])],
                       [(o, elem, [3, 4]) for o in outs], initializers=inits, opset=13)
    assert_matches_ort(model, {"x": x, "lo": np.array(-1, np_type), "hi": np.array(1.5, np_type)})


@pytest.mark.parametrize("opset", [6, 10])
def test_clip_attribute_form(opset):
    x = np.random.default_rng(6).uniform(-3, 3, (2, 5)).astype(np.float32)
    nodes = [helper.make_node("Clip", ["x"], ["both"], min=-1.0, max=2.0),
             helper.make_node("Clip", ["x"], ["min_only"], min=0.5),
             helper.make_node("Clip", ["x"], ["max_only"], max=-0.5),
             helper.make_node("Clip", ["x"], ["defaults"])]
    outs = ["both", "min_only", "max_only", "defaults"]
    model = make_model(nodes, [("x", TP.FLOAT, [2, 5])], [(o, TP.FLOAT, [2, 5]) for o in outs], opset=opset)
    assert_matches_ort(model, {"x": x})


def test_prelu_slope_broadcasts():
    shapes = [[3, 1, 1], [5], [1], [4, 5], [2, 3, 4, 5], []]
    rng = np.random.default_rng(7)
    feeds = {"x": rng.uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)}
    feeds.update({f"slope{i}": rng.uniform(0, 1, shape).astype(np.float32) for i, shape in enumerate(shapes)})
    nodes = [helper.make_node("PRelu", ["x", f"slope{i}"], [f"y{i}"]) for i in range(len(shapes))]
    inputs = [("x", TP.FLOAT, [2, 3, 4, 5])] + [(f"slope{i}", TP.FLOAT, s) for i, s in enumerate(shapes)]
    outputs = [(f"y{i}", TP.FLOAT, [2, 3, 4, 5]) for i in range(len(shapes))]
    model = make_model(nodes, inputs, outputs, opset=16)
    assert_matches_ort(model, feeds)


def test_prelu_float16():
    rng = np.random.default_rng(8)
    x = rng.uniform(-2, 2, (2, 3, 4)).astype(np.float16)
    slope = numpy_helper.from_array(rng.uniform(0, 1, (3, 1)).astype(np.float16), "slope")
    model = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"])], [("x", TP.FLOAT16, [2, 3, 4])],
                       [("y", TP.FLOAT16, [2, 3, 4])], initializers=[slope])
    assert_matches_ort(model, {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("np_type", [np.int32, np.int64, np.uint32, np.uint64], ids=lambda t: t.__name__)
def test_prelu_integers(np_type):
    """onnxruntime has no integer PRelu kernels: numpy is the oracle (the product wraps)."""
    info = np.iinfo(np_type)
    values = [[info.min, -5, 0, 5, info.max], [-1, -2, 3, info.min // 2, 1]] if info.min < 0 else \
        [[0, 5, 1, info.max, 3], [2, 9, 0, info.max - 1, 1]]
    x = np.array(values, dtype=np_type)
    slope = np.array([3, 2, 2, 2, 2], dtype=np_type)
    elem = INT_ELEM[np_type]
    model = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"])], [("x", elem, [2, 5]), ("slope", elem, [5])],
                       [("y", elem, [2, 5])])
    y, = run_onnxc(model, {"x": x, "slope": slope})
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y, np.where(x < 0, x * slope, x))


def test_symbolic_batch_two_sizes():
    slope = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1), "slope")
    bounds = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", 0.2), ("hi", 0.9))]
    nodes = [helper.make_node("Tanh", ["x"], ["t"]),
             helper.make_node("PRelu", ["t", "slope"], ["p"]),
             helper.make_node("Clip", ["p", "lo", "hi"], ["c"]),
             helper.make_node("Gelu", ["c"], ["y"], approximate="tanh")]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 3, 4])], [("y", TP.FLOAT, ["N", 3, 4])],
                       initializers=[slope] + bounds)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (2, 5):
        x = np.random.default_rng(n).uniform(-3, 3, (n, 3, 4)).astype(np.float32)
        y, = sess.run(None, {"x": x})
        expected, = run_ort(model, {"x": x})
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_prelu_symbolic_slope_is_checked_at_run_time():
    model = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"])],
                       [("x", TP.FLOAT, ["N", 4]), ("slope", TP.FLOAT, ["S"])], [("y", TP.FLOAT, ["N", 4])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(9).uniform(-1, 1, (3, 4)).astype(np.float32)
    for slope in (np.array([0.5], np.float32), np.arange(4, dtype=np.float32)):
        y, = sess.run(None, {"x": x, "slope": slope})
        np.testing.assert_allclose(y, run_ort(model, {"x": x, "slope": slope})[0], rtol=1e-6)
    with pytest.raises(onnxc.OnnxcError, match="slope"):
        sess.run(None, {"x": x, "slope": np.ones(2, np.float32)})


def test_older_opsets():
    """Opset 9: legacy versions of the activations (PRelu-9, Clip attribute form, Sign-9, Erf-9)."""
    x = np.random.default_rng(10).uniform(-3, 3, (2, 6)).astype(np.float32)
    ops = [("Relu", {}), ("Sigmoid", {}), ("Exp", {}), ("LeakyRelu", {"alpha": 0.3}), ("Elu", {}), ("Selu", {}),
           ("HardSigmoid", {}), ("Softplus", {}), ("Sign", {}), ("Erf", {}), ("IsNaN", {}),
           ("Clip", {"min": -1.0, "max": 1.0}), ("Abs", {}), ("Floor", {}), ("Sinh", {})]
    nodes = [helper.make_node(op, ["x"], [f"y{i}"], **attrs) for i, (op, attrs) in enumerate(ops)]
    nodes.append(helper.make_node("PRelu", ["x", "slope"], ["prelu"]))
    outputs = [(f"y{i}", TP.BOOL if op in BOOL_OUT else TP.FLOAT, [2, 6]) for i, (op, _) in enumerate(ops)]
    slope = numpy_helper.from_array(np.linspace(0, 1, 6).astype(np.float32), "slope")
    model = make_model(nodes, [("x", TP.FLOAT, [2, 6])], outputs + [("prelu", TP.FLOAT, [2, 6])],
                       initializers=[slope], opset=9)
    assert_matches_ort(model, {"x": x})


def test_invalid_models_are_rejected():
    gelu = make_model([helper.make_node("Gelu", ["x"], ["y"], approximate="exact")],
                      [("x", TP.FLOAT, [2])], [("y", TP.FLOAT, [2])])
    with pytest.raises(onnxc.OnnxcError, match="approximate"):
        run_onnxc(gelu, {"x": np.zeros(2, np.float32)})
    prelu = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"])],
                       [("x", TP.FLOAT, [2, 3]), ("slope", TP.FLOAT, [2])], [("y", TP.FLOAT, [2, 3])])
    with pytest.raises(onnxc.OnnxcError, match="slope"):
        run_onnxc(prelu, {"x": np.zeros((2, 3), np.float32), "slope": np.zeros(2, np.float32)})
    clip = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])],
                      [("x", TP.FLOAT, [2]), ("lo", TP.FLOAT, [2])], [("y", TP.FLOAT, [2])])
    with pytest.raises(onnxc.OnnxcError, match="scalar"):
        run_onnxc(clip, {"x": np.zeros(2, np.float32), "lo": np.zeros(2, np.float32)})
