"""Names and strings from a model never reach generated C unescaped."""
from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from onnxc.codegen.names import Mangler, c_string, comment

HOSTILE = [
    "*/ int evil = 1; /*",
    "line\nbreak #include <stdio.h>\n",
    '"quoted" \\ backslash',
    "trigraph ??/\nsplice",
    "#include \"/etc/passwd\"",
    "x" * 5000,
    "unicode \u2603 \u202e rtl",
    "a/b",
    "a_b",  # collides with "a/b" after mangling
]


def hostile_model() -> onnx.ModelProto:
    names = [f"{h}" for h in HOSTILE]
    nodes = []
    prev = names[0]
    for i, name in enumerate(names[1:], start=1):
        nodes.append(helper.make_node("Relu" if i % 2 else "Add", [prev] if i % 2 else [prev, prev], [name],
                                      name=HOSTILE[-i]))
        prev = name
    m = make_model(nodes, [(names[0], T.FLOAT, ["*/ dim\n", 3])], [(prev, T.FLOAT, ["*/ dim\n", 3])])
    m.graph.name = "*/ graph \n#define X"
    m.doc_string = "*/ doc"
    m.producer_name = "\"); system(\"rm -rf /\"); //"
    return m


def code_outside_comments_and_strings(text: str) -> str:
    """A small C lexer: what the compiler sees as code once comments and literals are removed."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            i = text.index("*/", i + 2) + 2
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif text[i] == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def test_hostile_names_compile_and_run_correctly(tmp_path):
    m = hostile_model()
    onnxc.compile_model(m, tmp_path, command="onnxc compile */ evil\n#include <x>")
    source = (tmp_path / "model.c").read_text()
    header = (tmp_path / "model.h").read_text()
    for text in (source, header):
        code = code_outside_comments_and_strings(text)
        for word in ("evil", "stdio", "passwd", "system"):
            assert not re.search(rf"\b{word}\b", code), word
        assert "#define X" not in code
        assert "??/" not in text and "x" * 200 not in text
        assert text.isascii()
    s = onnxc.InferenceSession(str(tmp_path))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    y = x
    for i in range(1, len(HOSTILE)):
        y = np.maximum(y, 0) if i % 2 else y + y
    np.testing.assert_allclose(s.run(None, {HOSTILE[0]: x})[0], y, rtol=1e-6)
    assert s.get_inputs()[0].name == HOSTILE[0]
    assert s.get_outputs()[0].name == HOSTILE[-1]
    assert s.get_modelmeta().producer_name == m.producer_name


def test_mangler_makes_unique_c_identifiers():
    mangle = Mangler({"ctx"})
    a, b, c = mangle("a/b", "t_"), mangle("a_b", "t_"), mangle("ctx", "")
    assert len({a, b, c}) == 3 and c != "ctx"
    assert mangle("a/b", "t_") == a
    for ident in (a, b, c, mangle("x" * 5000, "t_"), mangle("\u2603", "t_")):
        assert ident.isidentifier() and ident.isascii() and len(ident) <= 48


def test_comment_and_literal_escaping():
    for text in HOSTILE:
        com = comment(text)
        assert "*/" not in com and "\n" not in com and "\\" not in com and "??" not in com and com.isascii()
        lit = c_string(text)
        inner = lit[1:-1]
        assert lit.startswith('"') and lit.endswith('"') and '"' not in inner and "\n" not in inner
        assert "??" not in inner and inner.isascii()


def test_odd_dim_names_and_negative_dims_are_unknown_dims():
    """'?', names with no usable characters and -1 (as some exporters write) each mean one
    unknown dim of their own, as onnxruntime reads them."""
    x = helper.make_tensor_value_info("x", T.FLOAT, ["?", "批次", 3, "?"])
    x.type.tensor_type.shape.dim[2].dim_value = -1
    y = helper.make_tensor_value_info("y", T.FLOAT, None)
    y.type.tensor_type.shape.SetInParent()
    for _ in range(4):
        y.type.tensor_type.shape.dim.add()
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    sess = onnxc.InferenceSession(model.SerializeToString())
    data = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": data})[0], np.maximum(data, 0))
