"""Cast, CastLike, BitCast, Identity, Dropout, Constant, ConstantOfShape, Shape, Size, Range and EyeLike
against onnxruntime (numpy / ml_dtypes where onnxruntime lacks bfloat16).

Nodes that constant folding would evaluate at compile time are also compiled at
optimization level 0, so that their kernels run.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort

NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16, TP.BFLOAT16: ml_dtypes.bfloat16,
      TP.INT8: np.int8, TP.INT16: np.int16, TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8,
      TP.UINT16: np.uint16, TP.UINT32: np.uint32, TP.UINT64: np.uint64, TP.BOOL: np.bool_}
FLOATS = (TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.BFLOAT16)


def _name(elem: int) -> str:
    return TP.DataType.Name(elem).lower()


def _session(model: onnx.ModelProto, level: int = 99) -> onnxc.InferenceSession:
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel(level)
    return onnxc.InferenceSession(model.SerializeToString(), so)


def _assert_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, \
        f"{actual.dtype}{actual.shape} vs {expected.dtype}{expected.shape}"
    if expected.dtype.kind == "f" or expected.dtype == ml_dtypes.bfloat16:
        np.testing.assert_array_equal(actual.astype(np.float64), expected.astype(np.float64))
    else:
        np.testing.assert_array_equal(actual, expected)


# --- Cast --------------------------------------------------------------------------------------------

def _cast_all_model(src: int, shape, opset: int = 21) -> onnx.ModelProto:
    nodes = [helper.make_node("Cast", ["x"], [f"y_{_name(t)}"], to=t) for t in NP]
    return make_model(nodes, [("x", src, shape)], [(f"y_{_name(t)}", t, shape) for t in NP], opset=opset)


def _in_range_values(src: int) -> np.ndarray:
    """Values every target type represents (up to rounding of fractions), plus zero."""
    if src == TP.BOOL:
        return np.array([True, False, True, True, False, True, False, False])
    values = [0, 1, 2, 100, 127, 3, 64, 5]
    if src in FLOATS:
        values = [0, 1.5, 2.25, 100.75, 126.5, 3.0, 64.5, 0.25]
    return np.array(values).astype(NP[src])


@pytest.mark.parametrize("src", list(NP), ids=_name)
def test_cast_between_all_types(src):
    x = _in_range_values(src)
    model = _cast_all_model(src, [8])
    actual = run_onnxc(model, {"x": x})
    # ml_dtypes gives numpy's conversions for bfloat16 (onnxruntime has no bfloat16 Cast)
    for t, a in zip(NP, actual):
        _assert_equal(a, x.astype(np.float32).astype(NP[t]) if src == TP.BFLOAT16 else x.astype(NP[t]))
    if src != TP.BFLOAT16:
        expected = run_ort(make_model([n for n in model.graph.node if n.attribute[0].i != TP.BFLOAT16],
                                      [("x", src, [8])], [(f"y_{_name(t)}", t, [8]) for t in NP if t != TP.BFLOAT16]),
                           {"x": x})
        for e, a in zip(expected, [a for t, a in zip(NP, actual) if t != TP.BFLOAT16]):
            _assert_equal(a, e)


@pytest.mark.parametrize("src", [TP.FLOAT, TP.DOUBLE], ids=_name)
def test_cast_float_to_int_edge_values_match_onnxruntime(src):
    # NaN, infinities and out-of-range values: x86 results, as onnxruntime and numpy give them
    x = np.array([np.nan, np.inf, -np.inf, 300.7, -300.7, 70000.5, -1.5, 3e9, 2e19, -3e9, 1e20, -0.9],
                 NP[src])
    targets = [TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.INT32, TP.INT64, TP.UINT64, TP.BOOL]
    nodes = [helper.make_node("Cast", ["x"], [f"y{i}"], to=t) for i, t in enumerate(targets)]
    model = make_model(nodes, [("x", src, [12])], [(f"y{i}", t, [12]) for i, t in enumerate(targets)])
    for a, e in zip(run_onnxc(model, {"x": x}), run_ort(model, {"x": x})):
        _assert_equal(a, e)


def test_cast_float_to_uint32_edge_values():
    # onnxruntime's result for NaN and infinities depends on the SIMD lane; onnxc gives the
    # scalar x86 result (the low 32 bits of the 64-bit conversion)
    x = np.array([np.nan, np.inf, -np.inf, -1.5, 3e9, 5e9, -3e9, 1e20], np.float32)
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TP.UINT32)], [("x", TP.FLOAT, [8])],
                       [("y", TP.UINT32, [8])])
    _assert_equal(run_onnxc(model, {"x": x})[0],
                  np.array([0, 0, 0, 2**32 - 1, 3000000000, 705032704, 1294967296, 0], np.uint32))


def test_cast_to_float16_and_bfloat16_rounds_to_nearest_even():
    rng = np.random.default_rng(0)
    f32 = np.concatenate([rng.standard_normal(64) * 100, [65504, 65520, 1e6, -1e6, 2.0**-25, 2.0**-24 * 1.5,
                                                          1 + 2.0**-11, 1 + 3 * 2.0**-11, np.nan, -0.0]])
    f64 = f32 + rng.standard_normal(f32.size) * 1e-9
    n = f32.size
    nodes = [helper.make_node("Cast", ["f"], ["f_to_h"], to=TP.FLOAT16),
             helper.make_node("Cast", ["d"], ["d_to_h"], to=TP.FLOAT16),
             helper.make_node("Cast", ["f"], ["f_to_b"], to=TP.BFLOAT16),
             helper.make_node("Cast", ["b"], ["b_to_f"], to=TP.FLOAT)]
    model = make_model(nodes, [("f", TP.FLOAT, [n]), ("d", TP.DOUBLE, [n]), ("b", TP.BFLOAT16, [n])],
                       [("f_to_h", TP.FLOAT16, [n]), ("d_to_h", TP.FLOAT16, [n]), ("f_to_b", TP.BFLOAT16, [n]),
                        ("b_to_f", TP.FLOAT, [n])])
    f = f32.astype(np.float32)
    b = f.astype(ml_dtypes.bfloat16)
    with np.errstate(over="ignore"):
        expected = [f.astype(np.float16), f64.astype(np.float16), b, b.astype(np.float32)]
    for a, e in zip(run_onnxc(model, {"f": f, "d": f64, "b": b}), expected):
        _assert_equal(a, e)


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_opsets(opset):
    attrs = {"saturate": 1} if opset >= 19 else {}
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TP.INT32, **attrs)], [("x", TP.FLOAT, ["N"])],
                       [("y", TP.INT32, ["N"])], opset=opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (3, 6):
        x = np.linspace(-5, 5, n).astype(np.float32)
        _assert_equal(sess.run(None, {"x": x})[0], x.astype(np.int32))


def test_cast_like_matches_onnxruntime():
    nodes = [helper.make_node("CastLike", ["x", "like_int"], ["to_int"]),
             helper.make_node("CastLike", ["x", "like_half"], ["to_half"])]
    model = make_model(nodes, [("x", TP.DOUBLE, ["N", 2]), ("like_int", TP.INT64, [1]), ("like_half", TP.FLOAT16, [])],
                       [("to_int", TP.INT64, ["N", 2]), ("to_half", TP.FLOAT16, ["N", 2])], opset=21)
    feeds = {"x": np.array([[1.5, -2.5], [1e5, 3.25]]), "like_int": np.zeros(1, np.int64),
             "like_half": np.array(0, np.float16)}
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("to", [TP.COMPLEX64, TP.COMPLEX128])
def test_cast_to_types_onnxc_lacks_is_unsupported(to):
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=to)], [("x", TP.FLOAT, [2])], [("y", to, [2])])
    with pytest.raises(onnxc.UnsupportedError):
        run_onnxc(model, {"x": np.ones(2, np.float32)})


# --- Identity and Dropout -------------------------------------------------------------------------------

@pytest.mark.parametrize("level", [0, 99])
def test_identity_and_dropout_forward_the_input(level):
    nodes = [helper.make_node("Identity", ["x"], ["id"]),
             helper.make_node("Dropout", ["x"], ["drop", "mask"]),
             helper.make_node("Dropout", ["x", "r"], ["drop_r"])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 3]), ("r", TP.FLOAT, [])],
                       [("id", TP.FLOAT, ["N", 3]), ("drop", TP.FLOAT, ["N", 3]), ("mask", TP.BOOL, ["N", 3]),
                        ("drop_r", TP.FLOAT, ["N", 3])], opset=13)
    sess = _session(model, level)
    for n in (1, 4):
        feeds = {"x": np.arange(3 * n, dtype=np.float32).reshape(n, 3), "r": np.array(0.3, np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            _assert_equal(a, e)


def test_dropout_opset7_mask_has_the_input_type():
    model = make_model([helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3)], [("x", TP.DOUBLE, [2, 2])],
                       [("y", TP.DOUBLE, [2, 2]), ("mask", TP.DOUBLE, [2, 2])], opset=7)
    x = np.array([[1, 2], [3, 4]], np.float64)
    y, mask = run_onnxc(model, {"x": x})
    _assert_equal(y, x)
    _assert_equal(mask, np.ones((2, 2)))


def test_dropout_training_mode():
    true = numpy_helper.from_array(np.array(True), "t")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    model = make_model([helper.make_node("Dropout", ["x", "zero", "t"], ["y", "mask"])], [("x", TP.FLOAT, [3])],
                       [("y", TP.FLOAT, [3]), ("mask", TP.BOOL, [3])], initializers=[true, zero], opset=13)
    x = np.array([1, 2, 3], np.float32)
    y, mask = run_onnxc(model, {"x": x})  # training with ratio 0 drops nothing
    _assert_equal(y, x)
    _assert_equal(mask, np.ones(3, bool))

    model = make_model([helper.make_node("Dropout", ["x", "", "t"], ["y"])], [("x", TP.FLOAT, [4000])],
                       [("y", TP.FLOAT, [4000])], initializers=[true], opset=13)
    big = np.arange(1, 4001, dtype=np.float32)
    y, = run_onnxc(model, {"x": big})   # the default ratio 0.5: about half dropped, the kept ones doubled
    assert np.all((y == 0) | (y == 2 * big)) and 0.4 < np.mean(y == 0) < 0.6

    model = make_model([helper.make_node("Dropout", ["x", "r", "t"], ["y"])],
                       [("x", TP.FLOAT, [3]), ("r", TP.FLOAT, []), ("t", TP.BOOL, [])], [("y", TP.FLOAT, [3])],
                       opset=13)
    sess = _session(model)
    _assert_equal(sess.run(None, {"x": x, "r": np.array(0.5, np.float32), "t": np.array(False)})[0], x)
    _assert_equal(sess.run(None, {"x": x, "r": np.array(0.0, np.float32), "t": np.array(True)})[0], x)
    y = sess.run(None, {"x": x, "r": np.array(0.5, np.float32), "t": np.array(True)})[0]   # trains at run time
    assert np.all((y == 0) | (y == 2 * x))
    with pytest.raises(onnxc.RuntimeFailure, match="ratio"):
        sess.run(None, {"x": x, "r": np.array(1.5, np.float32), "t": np.array(True)})


# --- Constant and ConstantOfShape -----------------------------------------------------------------------

CONSTANTS = [
    ("value", numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7)),
    ("value", numpy_helper.from_array(np.array([-2**63, 2**63 - 1, 5], np.int64))),
    ("value", numpy_helper.from_array(np.array([[np.nan, np.inf], [-0.0, 65504]], np.float16))),
    ("value", numpy_helper.from_array(np.array([1.5, -3.25], ml_dtypes.bfloat16))),
    ("value", numpy_helper.from_array(np.array([True, False, True]))),
    ("value", numpy_helper.from_array(np.array(2**32 - 1, np.uint32))),
    ("value", numpy_helper.from_array(np.zeros((0, 3), np.int8))),
    ("value_float", 2.5), ("value_floats", [1.0, -2.0, 1e-30]), ("value_int", -7), ("value_ints", [3, 1, 4, 1, 5]),
    ("sparse_value", helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 6.0], np.float32)),
                                                numpy_helper.from_array(np.array([1, 6], np.int64)), [2, 4])),
]


def _expected_constant(attr: str, value) -> np.ndarray:
    if attr == "value":
        return numpy_helper.to_array(value)
    if attr == "sparse_value":
        return np.array([[0, 5, 0, 0], [0, 0, 6, 0]], np.float32)
    return np.array(value, np.float32 if "float" in attr else np.int64)


@pytest.mark.parametrize("attr,value", CONSTANTS, ids=[f"{a}{i}" for i, (a, _) in enumerate(CONSTANTS)])
def test_constant_kernel_writes_the_values(attr, value):
    expected = _expected_constant(attr, value)
    elem = helper.np_dtype_to_tensor_dtype(expected.dtype)
    model = make_model([helper.make_node("Constant", [], ["c"], **{attr: value})], [],
                       [("c", elem, list(expected.shape))], opset=13)
    for level in (0, 99):
        _assert_equal(_session(model, level).run(None, {})[0], expected)


@pytest.mark.parametrize("level", [0, 99])
def test_constant_of_shape_with_constant_shape(level):
    shape = numpy_helper.from_array(np.array([2, 3], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
             helper.make_node("ConstantOfShape", ["shape"], ["c"], value=numpy_helper.from_array(np.array([7], np.int32))),
             helper.make_node("Add", ["c", "x"], ["y"])]
    model = make_model(nodes, [("x", TP.INT32, [2, 3])], [("zeros", TP.FLOAT, [2, 3]), ("y", TP.INT32, [2, 3])],
                       initializers=[shape])
    zeros, y = _session(model, level).run(None, {"x": np.ones((2, 3), np.int32)})
    _assert_equal(zeros, np.zeros((2, 3), np.float32))
    _assert_equal(y, np.full((2, 3), 8, np.int32))


@pytest.mark.parametrize("elem", [TP.FLOAT16, TP.BFLOAT16, TP.INT64, TP.BOOL, TP.UINT8], ids=_name)
def test_constant_of_shape_with_runtime_shape(elem):
    value = numpy_helper.from_array(np.array([1], NP[elem]))
    model = make_model([helper.make_node("ConstantOfShape", ["shape"], ["y"], value=value)],
                       [("shape", TP.INT64, [3])], [("y", elem, ["a", "b", "c"])])
    sess = _session(model)
    for shape in ([2, 3, 1], [1, 0, 4], [4, 2, 2]):
        _assert_equal(sess.run(None, {"shape": np.array(shape, np.int64)})[0], np.ones(shape, NP[elem]))
    with pytest.raises(onnxc.RuntimeFailure, match="negative"):
        sess.run(None, {"shape": np.array([2, -1, 1], np.int64)})


# --- Shape and Size ---------------------------------------------------------------------------------------

SHAPE_SLICES = [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 3}, {"start": 3, "end": 1}, {"start": -9, "end": 9}]


@pytest.mark.parametrize("level", [0, 99])
def test_shape_and_size_of_symbolic_input(level):
    nodes = [helper.make_node("Shape", ["x"], [f"s{i}"], **attrs) for i, attrs in enumerate(SHAPE_SLICES)]
    nodes.append(helper.make_node("Size", ["x"], ["size"]))
    outputs = [(f"s{i}", TP.INT64, [None]) for i in range(len(SHAPE_SLICES))] + [("size", TP.INT64, [])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 3, "M"])], outputs, opset=21)
    sess = _session(model, level)
    for shape in ((2, 3, 5), (7, 3, 1)):
        feeds = {"x": np.zeros(shape, np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            _assert_equal(a, e)


def test_shape_and_size_of_static_input_at_level_0():
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Shape", ["x"], ["tail"], start=1)]
    model = make_model(nodes, [("x", TP.UINT8, [4, 2, 3])],
                       [("shape", TP.INT64, [3]), ("size", TP.INT64, []), ("tail", TP.INT64, [2])], opset=15)
    shape, size, tail = _session(model, 0).run(None, {"x": np.zeros((4, 2, 3), np.uint8)})
    _assert_equal(shape, np.array([4, 2, 3]))
    _assert_equal(size, np.array(24))
    _assert_equal(tail, np.array([2, 3]))


# --- Range -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.INT16, TP.INT32, TP.INT64], ids=_name)
def test_range_with_runtime_inputs(elem):
    model = make_model([helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                       [(n, elem, []) for n in ("start", "limit", "delta")], [("y", elem, ["n"])], opset=11)
    sess = _session(model)
    for start, limit, delta in ((1, 10, 3), (10, 4, -2), (5, 5, 1), (3, 0, 1), (-4, 9, 2)):
        feeds = {"start": np.array(start, NP[elem]), "limit": np.array(limit, NP[elem]),
                 "delta": np.array(delta, NP[elem])}
        _assert_equal(sess.run(None, feeds)[0], run_ort(model, feeds)[0])
    if elem != TP.FLOAT:
        return
    feeds = {"start": np.array(0.5, np.float32), "limit": np.array(2.0, np.float32), "delta": np.array(0.25, np.float32)}
    _assert_equal(sess.run(None, feeds)[0], run_ort(model, feeds)[0])
    with pytest.raises(onnxc.RuntimeFailure, match="delta is zero"):
        sess.run(None, {"start": np.array(1, np.float32), "limit": np.array(3, np.float32),
                        "delta": np.array(0, np.float32)})


def test_range_int64_extremes_do_not_overflow():
    model = make_model([helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                       [(n, TP.INT64, []) for n in ("start", "limit", "delta")], [("y", TP.INT64, ["n"])], opset=11)
    big = 2**62
    feeds = {"start": np.array(-big, np.int64), "limit": np.array(big, np.int64), "delta": np.array(big - 1, np.int64)}
    _assert_equal(run_onnxc(model, feeds)[0], np.array([-big, -1, big - 2], np.int64))


@pytest.mark.parametrize("elem", [TP.FLOAT16, TP.BFLOAT16], ids=_name)
def test_range_half_types_compute_in_float(elem):
    model = make_model([helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                       [(n, elem, []) for n in ("start", "limit", "delta")], [("y", elem, ["n"])], opset=27)
    feeds = {"start": np.array(1, NP[elem]), "limit": np.array(9.5, NP[elem]), "delta": np.array(1.5, NP[elem])}
    _assert_equal(run_onnxc(model, feeds)[0], np.arange(1, 9.5, 1.5, dtype=np.float32).astype(NP[elem]))


def test_range_of_constants_at_level_0():
    inits = [numpy_helper.from_array(np.array(v, np.int32), n) for n, v in (("start", 2), ("limit", 11), ("delta", 3))]
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    model = make_model(nodes, [("x", TP.INT32, [3])], [("y", TP.INT32, [3])], initializers=inits, opset=11)
    _assert_equal(_session(model, 0).run(None, {"x": np.ones(3, np.int32)})[0], np.array([3, 6, 9], np.int32))


# --- EyeLike ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"k": 1}, {"k": -2}, {"k": 7}, {"dtype": TP.INT32}, {"dtype": TP.BOOL, "k": -1}])
def test_eye_like(attrs):
    out = attrs.get("dtype", TP.FLOAT)
    model = make_model([helper.make_node("EyeLike", ["x"], ["y"], **attrs)], [("x", TP.FLOAT, ["R", "C"])],
                       [("y", out, ["R", "C"])], opset=9)
    sess = _session(model)
    for shape in ((3, 4), (5, 2)):
        expected = np.eye(*shape, k=attrs.get("k", 0), dtype=NP[out])
        _assert_equal(sess.run(None, {"x": np.zeros(shape, np.float32)})[0], expected)


# --- BitCast -------------------------------------------------------------------

@pytest.mark.parametrize("src,to", [(np.float32, TP.INT32), (np.int64, TP.DOUBLE), (np.uint16, TP.FLOAT16),
                                    (np.float16, TP.BFLOAT16), (np.int8, TP.UINT8), (np.uint8, TP.BOOL),
                                    (np.uint32, TP.FLOAT)])
def test_bitcast(src, to):
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, (2, 5)) if src == np.uint8 else rng.integers(-100, 100, (2, 5))).astype(src)
    if src in (np.float32, np.float16):
        x = rng.standard_normal((2, 5)).astype(src)
    m = make_model([helper.make_node("BitCast", ["x"], ["y"], to=to)],
                   [("x", helper.np_dtype_to_tensor_dtype(x.dtype), ["N", 5])], [("y", to, [None, 5])], opset=26)
    y = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    expected = x.view(helper.tensor_dtype_to_np_dtype(to))
    assert y.dtype == expected.dtype and y.shape == expected.shape
    assert y.tobytes() == expected.tobytes()


def test_bitcast_rejects_width_change():
    m = make_model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT64)], [("x", TP.FLOAT, [3])],
                   [("y", TP.INT64, [3])], opset=26)
    with pytest.raises(Exception, match="width"):
        onnxc.InferenceSession(m.SerializeToString())
