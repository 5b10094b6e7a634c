"""String tensors: inputs, outputs, constants and the string ops, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from helpers import make_model, run_onnxc, run_ort

WORDS = np.array([["hello world", " a  b c ", ""], ["x,y,,z", "héllo wörld", "tab\tsep"]], dtype=object)


def run_reference(model, feeds):
    from onnx.reference import ReferenceEvaluator
    out = ReferenceEvaluator(model).run(None, feeds)
    return [o.astype(object) if o.dtype.kind in "US" else o for o in out]  # it returns '<U' arrays


def check(model, feeds, reference=run_ort):
    expected = reference(model, feeds)
    actual = run_onnxc(model, feeds)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        assert a.tolist() == e.tolist()


def test_strings_through_data_movement_and_unsafe_constants():
    tricky = ['*/ "quoted" \\ ??=', "caf\u00e9", "", "new\nline"]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Concat", ["r", "c"], ["y"], axis=0),
             helper.make_node("Gather", ["y", "idx"], ["g"])]
    inits = [helper.make_tensor("shape", TP.INT64, [1], [-1]),
             helper.make_tensor("c", TP.STRING, [4], [s.encode() for s in tricky]),
             helper.make_tensor("idx", TP.INT64, [3], [0, 7, 9])]
    m = make_model(nodes, [("x", TP.STRING, [2, 3])], [("y", TP.STRING, [10]), ("g", TP.STRING, [3])], inits)
    check(m, {"x": WORDS})


def test_string_input_accepts_numpy_str_arrays():
    m = make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", TP.STRING, ["N"])], [("y", TP.STRING, ["N"])])
    out = run_onnxc(m, {"x": np.array(["a", "bc"])})[0]  # a '<U2' array, converted
    assert out.dtype == object and out.tolist() == ["a", "bc"]


def test_equal_and_concat_broadcast():
    nodes = [helper.make_node("Equal", ["a", "b"], ["eq"]), helper.make_node("StringConcat", ["a", "b"], ["cat"])]
    m = make_model(nodes, [("a", TP.STRING, [2, 3]), ("b", TP.STRING, [3])],
                   [("eq", TP.BOOL, [2, 3]), ("cat", TP.STRING, [2, 3])], opset=20)
    check(m, {"a": WORDS, "b": np.array(["hello world", "", "tab\tsep"], dtype=object)})


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ","}, {"delimiter": " ", "maxsplit": 1}, {"maxsplit": 1},
                                   {"delimiter": ",,"}])
def test_string_split(attrs):
    """Against the ONNX reference (Python's str.split): onnxruntime 1.32 differs on the empty
    string (0 pieces), tabs (not whitespace) and the rest after maxsplit (stripped)."""
    m = make_model([helper.make_node("StringSplit", ["x"], ["y", "n"], **attrs)], [("x", TP.STRING, [2, 3])],
                   [("y", TP.STRING, [2, 3, None]), ("n", TP.INT64, [2, 3])], opset=20)
    check(m, {"x": WORDS}, run_reference)


@pytest.mark.parametrize("attrs", [{}, {"case_change_action": "UPPER", "stopwords": ["b", "hello"]},
                                   {"case_change_action": "LOWER", "stopwords": ["B"], "is_case_sensitive": 0},
                                   {"stopwords": ["a", "b"], "is_case_sensitive": 1}])
@pytest.mark.parametrize("two_dim", [False, True])
def test_string_normalizer(attrs, two_dim):
    x = np.array(["a", "B", "Hello", "b"], dtype=object)
    shape = [1, 4] if two_dim else [4]
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)], [("x", TP.STRING, shape)],
                   [("y", TP.STRING, [None] * len(shape))], opset=20)
    check(m, {"x": x.reshape(shape)}, run_reference)  # onnxruntime needs an installed en_US locale


def test_string_normalizer_everything_dropped():
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=["a"])], [("x", TP.STRING, [2])],
                   [("y", TP.STRING, [None])], opset=20)
    check(m, {"x": np.array(["a", "a"], dtype=object)}, run_reference)


@pytest.mark.parametrize("pattern", [r"www\.[\w.-]+\.\bcom\b", r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
                                     r"[a-z]+\d*", r"(?:ab)+|x", r"\s*\S+"])
def test_regex_full_match(pattern):
    x = np.array(["www.google.com", "account@gmail.com", "abab", "x", "abc123", " tok", "no match!"], dtype=object)
    m = make_model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], [("x", TP.STRING, [7])],
                   [("y", TP.BOOL, [7])], opset=20)
    check(m, {"x": x})


def test_regex_without_a_posix_equivalent_is_refused():
    m = make_model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="a+?")], [("x", TP.STRING, [1])],
                   [("y", TP.BOOL, [1])], opset=20)
    with pytest.raises(onnxc.UnsupportedError, match="lazy"):
        run_onnxc(m, {"x": np.array(["a"], dtype=object)})


ML = {"ai.onnx.ml": 2}


@pytest.mark.parametrize("keys,values,x,default", [
    (("keys_strings", ["b", "a", "zz"]), ("values_int64s", [5, 6, 7]), np.array(["a", "q", "zz", "b"], dtype=object),
     {"default_int64": 42}),
    (("keys_int64s", [3, -1, 10]), ("values_strings", ["three", "minus", "ten"]), np.array([10, 3, 4], np.int64), {}),
    (("keys_floats", [0.5, float("nan"), -2.0]), ("values_floats", [1.0, 2.0, 3.0]),
     np.array([0.5, np.nan, 7.0, -2.0], np.float32), {"default_float": 9.0}),
])
def test_label_encoder(keys, values, x, default):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", **{keys[0]: keys[1]},
                            **{values[0]: values[1]}, **default)
    in_type = {np.dtype(object): TP.STRING, np.dtype(np.int64): TP.INT64, np.dtype(np.float32): TP.FLOAT}[x.dtype]
    out_type = {"values_int64s": TP.INT64, "values_strings": TP.STRING, "values_floats": TP.FLOAT}[values[0]]
    m = make_model([node], [("x", in_type, [len(x)])], [("y", out_type, [len(x)])], extra_opsets=ML)
    check(m, {"x": x})


def test_label_encoder_opset4_tensor_attributes():
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_tensor=helper.make_tensor("k", TP.STRING, [3], [b"a", b"b", b"c"]),
                            values_tensor=helper.make_tensor("v", TP.INT16, [3], [0, 1, 2]),
                            default_tensor=helper.make_tensor("d", TP.INT16, [1], [42]))
    m = make_model([node], [("x", TP.STRING, [5])], [("y", TP.INT16, [5])], extra_opsets={"ai.onnx.ml": 4})
    out = run_onnxc(m, {"x": np.array(["a", "b", "d", "c", "g"], dtype=object)})[0]
    assert out.dtype == np.int16 and out.tolist() == [0, 1, 42, 2, 42]


def test_label_encoder_opset4_nan_key_and_repeated_keys():
    """Since opset 4 a NaN key matches NaN inputs and a repeated key takes its last value."""
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_floats=[1.0, float("nan"), 1.0], values_int64s=[10, 20, 30], default_int64=-7)
    m = make_model([node], [("x", TP.FLOAT, [4])], [("y", TP.INT64, [4])], extra_opsets={"ai.onnx.ml": 4})
    out = run_onnxc(m, {"x": np.array([1.0, np.nan, 2.0, 1.0], np.float32)})[0]
    assert out.tolist() == [30, 20, -7, 30]


@pytest.mark.parametrize("src", [TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT8, TP.UINT32, TP.BOOL])
def test_cast_numbers_to_strings(src):
    values = {TP.FLOAT: np.array([0.1, -2.5, 1e20, np.nan, -np.inf, 3], np.float32),
              TP.DOUBLE: np.array([0.1, -2.5, 1e-300, np.nan, np.inf, 1 / 3], np.float64),
              TP.INT64: np.array([0, -5, 2**62, -2**63, 7, 1], np.int64),
              TP.INT8: np.array([0, -128, 127, 5, -1, 3], np.int8),
              TP.UINT32: np.array([0, 2**32 - 1, 5, 6, 7, 8], np.uint32),
              TP.BOOL: np.array([True, False, True, True, False, False])}[src]
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=TP.STRING)], [("x", src, [6])], [("y", TP.STRING, [6])])
    check(m, {"x": values})


@pytest.mark.parametrize("dst", [TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT32, TP.UINT8])
def test_cast_strings_to_numbers(dst):
    x = np.array(["1.5", "-3", "1e3", "42", "0", "7.25"], dtype=object)
    if dst in (TP.INT64, TP.INT32, TP.UINT8):
        x = np.array(["1", "-3", "100", "42", "0", "7"], dtype=object)
        if dst == TP.UINT8:
            x[1] = "3"
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [("x", TP.STRING, [6])], [("y", dst, [6])])
    expected = run_ort(m, {"x": x})[0]
    actual = run_onnxc(m, {"x": x})[0]
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("labels", [{"classlabels_int64s": [3, 1, 7]}, {"classlabels_strings": ["a", "b", "c"]}])
def test_zip_map_gives_a_list_of_dicts(labels):
    node = helper.make_node("ZipMap", ["x"], ["y"], domain="ai.onnx.ml", **labels)
    key = TP.STRING if "classlabels_strings" in labels else TP.INT64
    out_type = helper.make_sequence_type_proto(helper.make_map_type_proto(key, helper.make_tensor_type_proto(TP.FLOAT, [])))
    graph = helper.make_graph([node], "z", [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3])],
                              [helper.make_value_info("y", out_type)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 9
    x = np.random.default_rng(0).random((4, 3), dtype=np.float32)
    expected = run_ort(m, {"x": x})[0]
    sess = onnxc.InferenceSession(m.SerializeToString())
    actual = sess.run(None, {"x": x})[0]
    assert sess.get_outputs()[0].type == ("seq(map(string,tensor(float)))" if key == TP.STRING
                                          else "seq(map(int64,tensor(float)))")
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert list(a) == list(e)
        np.testing.assert_allclose(list(a.values()), list(e.values()), rtol=1e-6)
