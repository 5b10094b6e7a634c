"""Binary, variadic, comparison, logic and bitwise ops, and Where, against onnxruntime
(or the ONNX reference implementation / numpy where onnxruntime lacks a type or opset).

Many ops share one model (one compile) to keep the file fast.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort

NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16, TP.BFLOAT16: ml_dtypes.bfloat16,
      TP.INT8: np.int8, TP.INT16: np.int16, TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8,
      TP.UINT16: np.uint16, TP.UINT32: np.uint32, TP.UINT64: np.uint64, TP.BOOL: np.bool_}
COMPARISONS = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
A_SHAPE, B_SHAPE, OUT_SHAPE = [2, 3, 4], [3, 1], [2, 3, 4]


def _random(elem: int, shape, rng, low=-20, high=20, nonzero=False) -> np.ndarray:
    t = NP[elem]
    if elem == TP.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(t, np.integer):
        low = max(low, int(np.iinfo(t).min))
        x = rng.integers(low, high, shape).astype(t)
        if nonzero:
            x[x == 0] = 1
        return x
    x = rng.uniform(low, high, shape).astype(np.float32)
    if nonzero:
        x[np.abs(x) < 0.5] = 1.5
    return x.astype(t)


def _binary_model(ops, elem: int, a_shape=A_SHAPE, b_shape=B_SHAPE, out_shape=OUT_SHAPE, opset=21):
    """One node per (op, attributes), each on inputs a and b."""
    nodes = [helper.make_node(op, ["a", "b"], [f"y{i}"], **attrs) for i, (op, attrs) in enumerate(ops)]
    outputs = [(f"y{i}", TP.BOOL if op in COMPARISONS else elem, out_shape) for i, (op, _) in enumerate(ops)]
    return make_model(nodes, [("a", elem, a_shape), ("b", elem, b_shape)], outputs, opset=opset)


def _assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        e = np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}: {a.dtype}{a.shape} vs {e.dtype}{e.shape}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"output {i}")


def _reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


ARITH = [("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {})] + [(op, {}) for op in COMPARISONS]


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT8, TP.INT16, TP.INT32, TP.INT64,
                                  TP.UINT8, TP.UINT16, TP.UINT32, TP.UINT64],
                         ids=lambda e: TP.DataType.Name(e).lower())
def test_arithmetic_and_comparisons_match_onnxruntime(elem):
    ops = ARITH + [("Mod", {"fmod": 1})]
    if elem in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT32, TP.INT64):
        ops.append(("Pow", {}))
    if elem not in (TP.INT16, TP.UINT16):  # onnxruntime has no 16-bit Max/Min
        ops += [("Max", {}), ("Min", {})]
    if elem not in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        ops.append(("Mod", {}))
    rng = np.random.default_rng(elem)
    a = _random(elem, A_SHAPE, rng)
    b = _random(elem, B_SHAPE, rng, nonzero=True)
    if elem in (TP.INT32, TP.INT64):  # small powers stay exact
        a, b = np.clip(a, -6, 6), np.clip(b, 0, 5)
    b[b == 0] = 1
    assert_matches_ort(_binary_model(ops, elem), {"a": a, "b": b}, rtol=1e-3 if elem == TP.FLOAT16 else 1e-5)


def test_bfloat16_and_16_bit_extrema_match_reference():
    rng = np.random.default_rng(1)
    ops = ARITH + [("Max", {}), ("Min", {}), ("Pow", {}), ("Mod", {"fmod": 1})]
    a, b = _random(TP.BFLOAT16, A_SHAPE, rng, 0.5, 3), _random(TP.BFLOAT16, B_SHAPE, rng, 0.5, 3)
    model = _binary_model(ops, TP.BFLOAT16)
    _assert_close(run_onnxc(model, {"a": a, "b": b}), _reference(model, {"a": a, "b": b}), rtol=1e-2)
    for elem in (TP.INT16, TP.UINT16):
        a, b = _random(elem, A_SHAPE, rng), _random(elem, B_SHAPE, rng)
        model = _binary_model([("Max", {}), ("Min", {})], elem)
        _assert_close(run_onnxc(model, {"a": a, "b": b}), _reference(model, {"a": a, "b": b}))


def test_integer_arithmetic_wraps_like_onnxruntime():
    i32, i64 = np.iinfo(np.int32), np.iinfo(np.int64)
    feeds = {"a": np.array([i32.max, i32.min, 46341, -7], np.int32), "b": np.array([1, -1, 46341, 3], np.int32)}
    assert_matches_ort(_binary_model([("Add", {}), ("Sub", {}), ("Mul", {})], TP.INT32, [4], [4], [4]), feeds)
    feeds = {"a": np.array([i64.max, i64.min, 2**32 + 1], np.int64), "b": np.array([1, -1, 2**32 + 3], np.int64)}
    assert_matches_ort(_binary_model([("Add", {}), ("Sub", {}), ("Mul", {})], TP.INT64, [3], [3], [3]), feeds)
    feeds = {"a": np.array([65535, 300, 0], np.uint16), "b": np.array([65535, 300, 1], np.uint16)}
    assert_matches_ort(_binary_model([("Mul", {}), ("Sub", {})], TP.UINT16, [3], [3], [3]), feeds)


def test_integer_div_and_mod_signs():
    a = np.array([7, -7, 7, -7, 6, -128, 0], np.int8)
    b = np.array([2, 2, -2, -2, 3, -1, -5], np.int8)
    model = _binary_model([("Div", {}), ("Mod", {}), ("Mod", {"fmod": 1})], TP.INT8, [7], [7], [7])
    div, mod, fmod = run_onnxc(model, {"a": a, "b": b})
    np.testing.assert_array_equal(div, [3, -3, -3, 3, 2, -128, 0])  # truncation; -128 / -1 wraps
    np.testing.assert_array_equal(mod, [1, 1, -1, -1, 0, 0, 0])     # sign of the divisor
    np.testing.assert_array_equal(fmod, [1, -1, 1, -1, 0, 0, 0])    # sign of the dividend
    for elem in (TP.INT32, TP.INT64):  # the minimum divided by -1 overflows in C: it must wrap
        t = NP[elem]
        low = np.iinfo(t).min
        a, b = np.array([low, low, 9], t), np.array([-1, 1, -1], t)
        model = _binary_model([("Div", {}), ("Mod", {}), ("Mod", {"fmod": 1})], elem, [3], [3], [3])
        div, mod, fmod = run_onnxc(model, {"a": a, "b": b})
        np.testing.assert_array_equal(div, np.array([low, low, -9], t))
        np.testing.assert_array_equal(mod, np.zeros(3, t))
        np.testing.assert_array_equal(fmod, np.zeros(3, t))


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_division_by_zero_fails(op):
    model = _binary_model([(op, {})], TP.INT32, ["N"], [1], ["N"])
    sess = onnxc.InferenceSession(model.SerializeToString())
    ok = sess.run(None, {"a": np.array([5, 6], np.int32), "b": np.array([4], np.int32)})[0]
    np.testing.assert_array_equal(ok, [1, 1] if op == "Div" else [1, 2])
    with pytest.raises(onnxc.RuntimeFailure, match="by zero"):
        sess.run(None, {"a": np.array([5, 6], np.int32), "b": np.array([0], np.int32)})


def test_float_division_by_zero_gives_inf_and_nan():
    model = _binary_model([("Div", {}), ("Mod", {"fmod": 1})], TP.FLOAT, [3], [3], [3])
    feeds = {"a": np.array([1, -1, 0], np.float32), "b": np.zeros(3, np.float32)}
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], ids=lambda e: TP.DataType.Name(e).lower())
def test_float_mod_follows_numpy(elem):
    t = NP[elem]
    a = np.array([-4.3, 7.2, 5, 4.3, -7.2, 8, 0, -0.0, -3, 3, np.inf, 1, np.nan, 4], t)
    b = np.array([2.1, -3.4, 8, -2.1, 3.4, 5, -2, 2, np.inf, -np.inf, 2, 0, 2, 2], t)
    model = _binary_model([("Mod", {}), ("Mod", {"fmod": 1})], elem, [14], [14], [14], opset=28)
    with np.errstate(all="ignore"):
        expected = [np.mod(a, b), np.fmod(a, b)]
    actual = run_onnxc(model, {"a": a, "b": b})
    _assert_close(actual, expected, rtol=0, atol=0)
    np.testing.assert_array_equal(np.signbit(actual[0]), np.signbit(expected[0]))  # signed zeros too


@pytest.mark.parametrize("base,exponent", [(TP.FLOAT, TP.INT64), (TP.FLOAT, TP.DOUBLE), (TP.INT32, TP.FLOAT),
                                           (TP.INT64, TP.INT64), (TP.INT32, TP.INT32), (TP.DOUBLE, TP.INT32),
                                           (TP.FLOAT16, TP.FLOAT)],
                         ids=lambda e: TP.DataType.Name(e).lower())
def test_pow_mixed_types_match_onnxruntime(base, exponent):
    x = np.array([[2, -2, 3, 0.5, 1.5, 10], [-1, 1, 0, 4, 2.5, 7]]).astype(NP[base])
    y = np.array([3, -1, 2, 0, 1, 2]).astype(NP[exponent])
    model = make_model([helper.make_node("Pow", ["x", "y"], ["z"])], [("x", base, [2, 6]), ("y", exponent, [6])],
                       [("z", base, [2, 6])], opset=15)
    assert_matches_ort(model, {"x": x, "y": y}, rtol=1e-3)


def test_pow_of_integers_truncates_like_onnxruntime():
    x = np.array([2, 2, -2, 3, 1, -1, 46341, 7, 5], np.int32)
    y = np.array([3, -1, -1, -2, -5, -3, 2, 30, 0], np.int32)
    model = make_model([helper.make_node("Pow", ["x", "y"], ["z"])], [("x", TP.INT32, [9]), ("y", TP.INT32, [9])],
                       [("z", TP.INT32, [9])], opset=15)
    assert_matches_ort(model, {"x": x, "y": y})


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE], ids=lambda e: TP.DataType.Name(e).lower())
def test_variadic_ops_broadcast(elem):
    shapes = [[2, 1, 4], [3, 1], [4]]
    inputs = [(f"x{i}", elem, s) for i, s in enumerate(shapes)]
    ops = ["Sum", "Mean", "Max", "Min"]
    nodes = [helper.make_node(op, [n for n, _, _ in inputs], [f"y{i}"]) for i, op in enumerate(ops)]
    nodes += [helper.make_node(op, ["x0"], [f"one{i}"]) for i, op in enumerate(ops)]
    outputs = [(f"y{i}", elem, [2, 3, 4]) for i in range(4)] + [(f"one{i}", elem, [2, 1, 4]) for i in range(4)]
    rng = np.random.default_rng(3)
    feeds = {n: _random(elem, s, rng) for n, _, s in inputs}
    model = make_model(nodes, inputs, outputs, opset=13)
    if elem == TP.DOUBLE:  # onnxruntime has no double Mean
        x = [feeds[n] for n, _, _ in inputs]
        expected = [x[0] + x[1] + x[2], (x[0] + x[1] + x[2]) / 3, np.maximum(np.maximum(x[0], x[1]), x[2]),
                    np.minimum(np.minimum(x[0], x[1]), x[2])] + [x[0]] * 4
        _assert_close(run_onnxc(model, feeds), expected)
    else:
        assert_matches_ort(model, feeds, rtol=2e-3 if elem == TP.FLOAT16 else 1e-5)


def test_max_min_propagate_nan():
    model = make_model([helper.make_node("Max", ["a", "b"], ["mx"]), helper.make_node("Min", ["a", "b"], ["mn"])],
                       [("a", TP.FLOAT, [4]), ("b", TP.FLOAT, [4])], [("mx", TP.FLOAT, [4]), ("mn", TP.FLOAT, [4])])
    feeds = {"a": np.array([np.nan, 1, 2, -np.inf], np.float32), "b": np.array([1, np.nan, 1, 0], np.float32)}
    assert_matches_ort(model, feeds)


def test_opset6_variadic_requires_equal_shapes():
    inputs = [("a", TP.FLOAT, [2, 3]), ("b", TP.FLOAT, [2, 3])]
    model = make_model([helper.make_node("Sum", ["a", "b"], ["y"])], inputs, [("y", TP.FLOAT, [2, 3])], opset=6)
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    np.testing.assert_array_equal(run_onnxc(model, {"a": a, "b": b})[0], a + b)
    bad = make_model([helper.make_node("Max", ["a", "b"], ["y"])], [("a", TP.FLOAT, [2, 3]), ("b", TP.FLOAT, [3])],
                     [("y", TP.FLOAT, [2, 3])], opset=6)
    with pytest.raises(onnxc.ShapeError):
        run_onnxc(bad, {"a": a, "b": np.ones(3, np.float32)})


def test_opset6_legacy_broadcast_attributes():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([1, 2, 3], np.float32)
    nodes = [helper.make_node("Add", ["a", "b"], ["axis1"], broadcast=1, axis=1),
             helper.make_node("Mul", ["a", "c"], ["suffix"], broadcast=1),
             helper.make_node("Sub", ["a", "a"], ["same"])]
    model = make_model(nodes, [("a", TP.FLOAT, [2, 3, 4]), ("b", TP.FLOAT, [3]), ("c", TP.FLOAT, [4])],
                       [(n, TP.FLOAT, [2, 3, 4]) for n in ("axis1", "suffix", "same")], opset=6)
    c = np.array([2, 3, 4, 5], np.float32)
    axis1, suffix, same = run_onnxc(model, {"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(axis1, a + b.reshape(3, 1))
    np.testing.assert_array_equal(suffix, a * c)
    np.testing.assert_array_equal(same, np.zeros_like(a))


def test_logic_bitwise_and_where_match_onnxruntime():
    rng = np.random.default_rng(5)
    nodes = [helper.make_node(op, ["p", "q"], [op.lower()]) for op in ("And", "Or", "Xor")]
    nodes += [helper.make_node(op, ["m", "n"], [op.lower()]) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")]
    nodes += [helper.make_node("Where", ["p", "x", "w"], ["where"]),
              helper.make_node("Equal", ["p", "q"], ["equal"])]
    inputs = [("p", TP.BOOL, [2, 1, 4]), ("q", TP.BOOL, [3, 1]), ("m", TP.INT16, [2, 3, 4]), ("n", TP.INT16, [4]),
              ("x", TP.FLOAT, [3, 4]), ("w", TP.FLOAT, [1])]
    outputs = [(n, TP.BOOL, [2, 3, 4]) for n in ("and", "or", "xor", "equal")]
    outputs += [(n, TP.INT16, [2, 3, 4]) for n in ("bitwiseand", "bitwiseor", "bitwisexor")]
    outputs += [("where", TP.FLOAT, [2, 3, 4])]
    feeds = {n: _random(t, s, rng, -1000, 1000) for n, t, s in inputs}
    assert_matches_ort(make_model(nodes, inputs, outputs, opset=18), feeds)


@pytest.mark.parametrize("elem", [TP.UINT8, TP.UINT16, TP.UINT32, TP.UINT64], ids=lambda e: TP.DataType.Name(e).lower())
def test_bit_shift_unsigned_matches_onnxruntime(elem):
    bits = 8 * np.dtype(NP[elem]).itemsize
    x = np.array([1, 255, 7, 128, 3, 1], NP[elem])
    y = np.array([1, 3, bits - 1, 7, bits, bits + 5], NP[elem])
    nodes = [helper.make_node("BitShift", ["x", "y"], ["left"], direction="LEFT"),
             helper.make_node("BitShift", ["x", "y"], ["right"], direction="RIGHT")]
    model = make_model(nodes, [("x", elem, [6]), ("y", elem, [6])], [("left", elem, [6]), ("right", elem, [6])])
    _assert_close(run_onnxc(model, {"x": x, "y": y}), _reference(model, {"x": x, "y": y}))
    x, y = x[:4], y[:4]  # shifts below the width: onnxruntime agrees
    assert_matches_ort(make_model(nodes, [("x", elem, [4]), ("y", elem, [4])],
                                  [("left", elem, [4]), ("right", elem, [4])]), {"x": x, "y": y})


@pytest.mark.parametrize("elem", [TP.INT8, TP.INT16, TP.INT32, TP.INT64], ids=lambda e: TP.DataType.Name(e).lower())
def test_bit_shift_signed_follows_the_spec(elem):
    bits = 8 * np.dtype(NP[elem]).itemsize
    x = np.array([-8, 4, -1, 64, 1, -64, -128, 5], NP[elem])
    y = np.array([-1, bits, bits + 3, 1, bits - 1, 1, 1, 0], NP[elem])
    nodes = [helper.make_node("BitShift", ["x", "y"], ["left"], direction="LEFT"),
             helper.make_node("BitShift", ["x", "y"], ["right"], direction="RIGHT")]
    model = make_model(nodes, [("x", elem, [8]), ("y", elem, [8])], [("left", elem, [8]), ("right", elem, [8])],
                       opset=28)
    _assert_close(run_onnxc(model, {"x": x, "y": y}), _reference(model, {"x": x, "y": y}))


def test_symbolic_dims_run_at_two_sizes():
    nodes = [helper.make_node("Add", ["a", "b"], ["add"]), helper.make_node("Div", ["a", "b"], ["div"]),
             helper.make_node("Less", ["a", "c"], ["less"]), helper.make_node("Max", ["a", "b", "c"], ["max"]),
             helper.make_node("Where", ["less", "a", "b"], ["where"])]
    inputs = [("a", TP.INT64, ["N", 3]), ("b", TP.INT64, [3]), ("c", TP.INT64, ["N", 1])]
    outputs = [(n, TP.INT64, ["N", 3]) for n in ("add", "div", "max", "where")] + [("less", TP.BOOL, ["N", 3])]
    model = make_model(nodes, inputs, outputs)
    sess = onnxc.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(7)
    for n in (2, 5):
        feeds = {"a": rng.integers(-50, 50, (n, 3)), "b": np.array([3, -4, 7]), "c": rng.integers(-50, 50, (n, 1))}
        _assert_close(sess.run(None, feeds), run_ort(model, feeds))


def test_symbolic_dims_broadcast_against_each_other():
    model = _binary_model([("Mul", {}), ("Greater", {})], TP.FLOAT, ["N", 1], [1, "M"], ["N", "M"])
    sess = onnxc.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(8)
    for n, m in ((2, 3), (4, 1)):
        feeds = {"a": _random(TP.FLOAT, (n, 1), rng), "b": _random(TP.FLOAT, (1, m), rng)}
        _assert_close(sess.run(None, feeds), run_ort(model, feeds))


def test_constant_divisor_needs_no_check():
    b = numpy_helper.from_array(np.array([2, -3, 4], np.int32), "b")
    model = make_model([helper.make_node("Div", ["a", "b"], ["y"])], [("a", TP.INT32, ["N", 3])],
                       [("y", TP.INT32, ["N", 3])], initializers=[b])
    assert_matches_ort(model, {"a": np.arange(-6, 6, dtype=np.int32).reshape(4, 3)})
