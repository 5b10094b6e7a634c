"""Hostile models: every string a model carries (names, doc strings, metadata, domains, string
constants and attributes) reaches the generated C only mangled or escaped, and the model still
computes what onnxruntime computes. Complements test_untrusted_names.py with NUL bytes, 100k-character
names, metadata, string data and custom-op attributes."""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model, run_ort
from onnxc.runtime.custom_ops import header_path
from test_untrusted_names import code_outside_comments_and_strings

HERE = os.path.dirname(os.path.abspath(__file__))
HUGE = "n" * 100_000
# Fragments that would change the program if they reached the source raw.
PAYLOADS = ["*/ int evil_payload = 1; /*", "\n#include <evil_header.h>\n", '"); evil_call(); ("',
            "back\\slash\\", "??/\nevil_trigraph", "nul\0evil_nul", "\u2603 \u202e \U0001F600"]
# Distinct names that a naive mangler would make the same C identifier.
COLLIDING = ["a b", "a_b", "a.b", "a-b", "x" * 60 + "1", "x" * 60 + "2"]
ML = {"ai.onnx.ml": 3}


def assert_source_is_safe(folder: str) -> None:
    """model.c and model.h: ASCII, no NUL, no raw payload, no injected preprocessor line, no huge
    identifier or comment."""
    for file in ("model.c", "model.h"):
        raw = open(os.path.join(folder, file), "rb").read()
        assert b"\0" not in raw and raw.isascii(), file
        text = raw.decode()
        code = code_outside_comments_and_strings(text)
        for word in ("evil_payload", "evil_header", "evil_call", "evil_trigraph", "evil_nul"):
            assert not re.search(rf"\b{word}\b", code), (file, word)
        for payload in PAYLOADS:
            assert payload not in text, (file, payload)
        assert "*/ int evil" not in text and "??/" not in text
        assert not re.search(r"^\s*#\s*(include\s*<evil|define X|error)", text, re.M), file
        # a huge name is cut short in identifiers and comments (string data, e.g. attributes, stays whole)
        assert "n" * 1000 not in code, file
        assert all(len(line) < 1000 for line in text.splitlines() if '"' not in line), file


def session(model: onnx.ModelProto, options: onnxc.SessionOptions | None = None) -> onnxc.InferenceSession:
    sess = onnxc.InferenceSession(model.SerializeToString(), options)
    assert_source_is_safe(sess._folder)
    return sess


def hostile_graph_model() -> tuple[onnx.ModelProto, list[str]]:
    """x -> Relu -> Neg/Abs/Identity/... under hostile node, value, dim and graph names; every
    string field of the model and its graph set to a payload."""
    x, mid = "in\0put */\n#include <evil_header.h>", HUGE
    outs = PAYLOADS[1:4] + COLLIDING
    nodes = [helper.make_node("Relu", [x], [mid], name=HUGE + "1", doc_string=PAYLOADS[0])]
    ops = ["Neg", "Abs", "Sigmoid", "Identity", "Neg", "Abs", "Sigmoid", "Identity", "Neg"]
    for i, (name, op) in enumerate(zip(outs, ops)):
        nodes.append(helper.make_node(op, [mid], [name], name=COLLIDING[i % len(COLLIDING)] if i < 6 else PAYLOADS[i - 6],
                                      doc_string=PAYLOADS[i % len(PAYLOADS)]))
    dim = "*/ d\0im \n#define X"
    m = make_model(nodes, [(x, T.FLOAT, [dim, 3])], [(o, T.FLOAT, [dim, 3]) for o in outs],
                   extra_opsets={"*/ evil.domain\n#include <evil_header.h>": 1})
    m.graph.value_info.append(helper.make_tensor_value_info(mid, T.FLOAT, [dim, 3]))
    m.graph.value_info[0].doc_string = PAYLOADS[5]
    m.graph.input[0].doc_string = PAYLOADS[2]
    m.graph.name = "graph\0*/\n#define X 1"
    m.graph.doc_string = PAYLOADS[1]
    m.doc_string = PAYLOADS[0] + PAYLOADS[5]
    m.producer_name = PAYLOADS[2] + "\0"
    m.producer_version = "\n#error evil"
    m.domain = "*/\0evil.domain"
    helper.set_model_props(m, {"key\0*/": PAYLOADS[1], HUGE: HUGE + "\0", PAYLOADS[4]: PAYLOADS[6]})
    return m, [x] + outs


def test_hostile_names_metadata_and_nul_bytes_compile_and_match_onnxruntime():
    model, names = hostile_graph_model()
    feed = {names[0]: np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)}
    expected = run_ort(model, feed)
    sess = session(model)
    actual = sess.run(None, feed)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
    # the names the session reports are the model's, byte for byte, and select outputs
    assert [i.name for i in sess.get_inputs()] == names[:1]
    assert [o.name for o in sess.get_outputs()] == names[1:]
    assert sess.get_inputs()[0].shape == ["*/ d\0im \n#define X", 3]
    wanted = [names[-1], names[4], names[5]]
    for name, a in zip(wanted, sess.run(wanted, feed)):
        np.testing.assert_array_equal(a, actual[names.index(name) - 1])
    meta = sess.get_modelmeta()
    assert meta.producer_name == model.producer_name and meta.graph_name == model.graph.name
    assert meta.domain == model.domain and meta.description == model.doc_string
    assert meta.custom_metadata_map == {p.key: p.value for p in model.metadata_props}
    # names that collide after mangling still name distinct values: Neg vs Abs vs Sigmoid ...
    by_name = dict(zip(names[1:], actual))
    assert not np.array_equal(by_name["a b"], by_name["a_b"])
    with pytest.raises(onnxc.InvalidArgument, match="Invalid input name"):
        sess.run(None, {"in": feed[names[0]]})
    with pytest.raises(onnxc.InvalidArgument, match="Invalid output name"):
        sess.run(["a_b\0"], feed)


@pytest.mark.parametrize("level", [onnxc.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   onnxc.GraphOptimizationLevel.ORT_ENABLE_ALL])
def test_names_that_collide_after_mangling_stay_distinct(level):
    """Intermediates whose names mangle (or truncate) to one identifier are distinct C variables."""
    ops = ["Neg", "Abs", "Sigmoid", "Relu", "Exp", "Cos"]
    nodes = [helper.make_node(op, ["x"], [name], name=name) for op, name in zip(ops, COLLIDING)]
    nodes.append(helper.make_node("Concat", COLLIDING, ["y"], axis=0, name="a;b"))
    m = make_model(nodes, [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [12, 3])])
    so = onnxc.SessionOptions()
    so.graph_optimization_level = level
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(session(m, so).run(None, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-6)


def test_hostile_string_constants_and_attributes_match_onnxruntime():
    words = [p for p in PAYLOADS if "\0" not in p] + ["x" * 3000]
    const = helper.make_tensor("c", T.STRING, [len(words)], [w.encode() for w in words])
    nodes = [helper.make_node("Constant", [], ["c"], value=const, name=PAYLOADS[0]),
             helper.make_node("Concat", ["s", "c"], ["joined"], axis=0),
             helper.make_node("LabelEncoder", ["joined"], ["encoded"], domain="ai.onnx.ml",
                              keys_strings=words, values_strings=list(reversed(words)), default_string=PAYLOADS[1]),
             helper.make_node("RegexFullMatch", ["joined"], ["matched"], pattern='[*/ ]+int evil_payload = 1; /\\*'),
             helper.make_node("StringSplit", ["joined"], ["pieces", "counts"], delimiter="*/"),
             helper.make_node("StringSplit", ["joined"], ["pieces2", "counts2"], delimiter='"); '),
             helper.make_node("StringConcat", ["joined", "joined"], ["twice"])]
    m = make_model(nodes, [("s", T.STRING, [2])],
                   [("joined", T.STRING, [None]), ("encoded", T.STRING, [None]), ("matched", T.BOOL, [None]),
                    ("pieces", T.STRING, [None, None]), ("counts", T.INT64, [None]),
                    ("pieces2", T.STRING, [None, None]), ("counts2", T.INT64, [None]), ("twice", T.STRING, [None])],
                   extra_opsets=ML)
    feed = {"s": np.array([PAYLOADS[0], "not a key \\ \u2603"], dtype=object)}
    expected = run_ort(m, feed)
    actual = session(m).run(None, feed)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, i
        np.testing.assert_array_equal(a, e, err_msg=str(i))
    assert actual[2][0] and not actual[2][1]   # the pattern matches the payload itself, escaped intact


def test_hostile_stopwords_are_exact():
    """StringNormalizer (onnxruntime needs the en_US.UTF-8 locale installed for it, so the
    expected values are written out): every hostile stopword drops exactly the equal strings."""
    stop = [p for p in PAYLOADS if "\0" not in p] + ["*/ X /*", "a"]
    node = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=stop, is_case_sensitive=1,
                            case_change_action="UPPER", name=PAYLOADS[0])
    m = make_model([node], [("x", T.STRING, [None])], [("y", T.STRING, [None])], opset=17)
    x = np.array(stop + ["*/ x /*", "ab", "A", "back\\slash", "keep ??/ me"], dtype=object)
    y = session(m).run(None, {"x": x})[0]
    assert y.tolist() == ["*/ X /*", "AB", "A", "BACK\\SLASH", "KEEP ??/ ME"]


@pytest.mark.parametrize("case", ["constant", "stopword", "delimiter", "pattern", "label_key"])
def test_nul_in_model_strings_is_refused_not_truncated(case):
    """C strings end at NUL: a string constant or attribute holding one is refused when compiling
    rather than silently cut short (a cut delimiter or stopword would match other strings)."""
    bad = "a\0b"
    if case == "constant":
        node = helper.make_node("Constant", [], ["y"], value=helper.make_tensor("v", T.STRING, [1], [bad.encode()]))
        m = make_model([node], [], [("y", T.STRING, [1])])
    elif case == "stopword":
        node = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=[bad])
        m = make_model([node], [("x", T.STRING, [2])], [("y", T.STRING, [None])], opset=17)
    elif case == "delimiter":
        node = helper.make_node("StringSplit", ["x"], ["y", "z"], delimiter=bad)
        m = make_model([node], [("x", T.STRING, [2])], [("y", T.STRING, [2, None]), ("z", T.INT64, [2])])
    elif case == "pattern":
        node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=bad)
        m = make_model([node], [("x", T.STRING, [2])], [("y", T.BOOL, [2])])
    else:
        node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_strings=[bad, "c"],
                                values_int64s=[1, 2])
        m = make_model([node], [("x", T.STRING, [2])], [("y", T.INT64, [2])], extra_opsets=ML)
    with pytest.raises(onnxc.UnsupportedError, match="NUL"):
        onnxc.InferenceSession(m.SerializeToString())


def test_nul_in_a_fed_string_is_an_invalid_argument():
    m = make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", T.STRING, [2])], [("y", T.STRING, [2])])
    sess = session(m)
    with pytest.raises(onnxc.InvalidArgument, match="NUL"):
        sess.run(None, {"x": np.array(["a\0b", "c"], dtype=object)})
    assert sess.run(None, {"x": np.array([PAYLOADS[2], HUGE], dtype=object)})[0].tolist() == [PAYLOADS[2], HUGE]


def test_hostile_local_function_names_and_domains():
    """A model-local function in a hostile domain, with hostile node and value names inside."""
    domain, fname = "*/ evil.domain\n#include <evil_header.h>", '"); evil_call(); ("'
    body = [helper.make_node("Mul", ["fx\0*/", "fx\0*/"], [PAYLOADS[1]], name=PAYLOADS[0]),
            helper.make_node("Neg", [PAYLOADS[1]], ["fy??/"], name=HUGE)]
    fn = helper.make_function(domain, fname, ["fx\0*/"], ["fy??/"], body, [helper.make_opsetid("", 21)])
    m = make_model([helper.make_node(fname, ["x"], ["y"], domain=domain, name=PAYLOADS[3])],
                   [("x", T.FLOAT, [5])], [("y", T.FLOAT, [5])], extra_opsets={domain: 1})
    m.functions.append(fn)
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    np.testing.assert_array_equal(session(m).run(None, {"x": x})[0], run_ort(m, {"x": x})[0])


def test_unknown_hostile_domain_is_an_unsupported_error():
    domain = "*/ evil.domain\n#include <evil_header.h>\0"
    m = make_model([helper.make_node(PAYLOADS[2], ["x"], ["y"], domain=domain)], [("x", T.FLOAT, [2])],
                   [("y", T.FLOAT, [2])], extra_opsets={domain: 1})
    with pytest.raises(onnxc.UnsupportedError, match="evil.domain"):
        onnxc.InferenceSession(m.SerializeToString())


@pytest.fixture(scope="module")
def custom_library(tmp_path_factory):
    out = tmp_path_factory.mktemp("custom") / "libexample_ops.so"
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-std=c11", "-shared", "-fPIC", "-I",
                    os.path.dirname(header_path()), os.path.join(HERE, "custom_ops", "example_ops.c"),
                    "-o", str(out)], check=True)
    return str(out)


def test_hostile_custom_op_attributes(custom_library):
    """Custom-op attributes reach the library as a JSON literal in the generated code."""
    node = helper.make_node("ScaledAdd", ["a", "b"], ["y"], domain="ai.example", alpha=0.5, name=PAYLOADS[0],
                            note=PAYLOADS[0] + PAYLOADS[1] + PAYLOADS[2] + PAYLOADS[3] + PAYLOADS[5],
                            notes=[HUGE, PAYLOADS[4]])
    node.attribute.append(helper.make_attribute("*/ \"evil_key\n", "\0"))
    m = make_model([node], [("a", T.FLOAT, [3]), ("b", T.FLOAT, [3])], [("y", T.FLOAT, [None])],
                   extra_opsets={"ai.example": 1})
    so = onnxc.SessionOptions()
    so.register_custom_ops_library(custom_library)
    a, b = np.arange(3, dtype=np.float32), np.full(3, 4, np.float32)
    np.testing.assert_array_equal(session(m, so).run(None, {"a": a, "b": b})[0], a + 0.5 * b)
