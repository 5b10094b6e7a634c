"""The C ABI is declared once (codegen/abi.py): the generated model.h, the loader's cffi
declarations and the library's definitions must agree. (The custom-op loader reads
onnxc_custom_op.h itself: tests/test_custom_ops.py.)"""
from __future__ import annotations

import re
import shutil
import subprocess

import cffi
import pytest
from onnx import TensorProto as T
from onnx import helper

from helpers import make_model
from onnxc.codegen import abi
from onnxc.driver import CompileOptions, generate_source


def plain_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, ["N", 4])], [("y", T.FLOAT, ["N", 4])])


def random_model():
    return make_model([helper.make_node("RandomUniformLike", ["x"], ["y"])], [("x", T.FLOAT, [2, 3])],
                      [("y", T.FLOAT, [2, 3])])


def sequence_model():
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    return make_model(nodes, [("x", T.FLOAT, [2])], [("n", T.INT64, [])])


MODELS = {"plain": plain_model, "random": random_model, "sequence": sequence_model}


def declarations(text: str) -> str:
    """A header's C declarations: without comments, preprocessor lines and the C++ guard."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith("#") and line.strip() not in ('extern "C" {', "}"))


def statements(text: str) -> set[str]:
    """A header's declarations, whitespace normalized, one per statement."""
    return {" ".join(s.split()) for s in declarations(text).split(";") if s.strip()}


# (CUDA builds refuse random operators: the session runs such a model on the CPU)
BUILDS = [("plain", "native"), ("random", "native"), ("sequence", "native"), ("plain", "cuda"), ("sequence", "cuda")]


@pytest.mark.parametrize("model,target", BUILDS)
def test_header_declares_what_the_loader_declares(model, target):
    emitted = generate_source(MODELS[model](), CompileOptions(prefix="net", target=target, cuda_emulate=True))
    header = statements(emitted.header)
    cffi.FFI().cdef(declarations(emitted.header))   # as the loader's, cffi reads them
    loader = statements(abi.cdef("net"))
    assert header <= loader
    declared = {re.search(r"net_(\w+)\(", s).group(1) for s in header if "(" in s}
    features = {"random"} if model == "random" else {"sequences"} if model == "sequence" else set()
    features |= {"cuda"} if target == "cuda" else set()
    assert declared == {f.name for f in abi.exported(features)}
    assert ("onnxc_seq" in emitted.header) == (model == "sequence")


@pytest.mark.parametrize("model,target", [("plain", "native"), ("random", "native"), ("plain", "cuda")])
def test_header_matches_the_library_definitions(model, target, tmp_path):
    """model.h read before the library's own source: a definition that differs from its
    declaration does not compile."""
    emitted = generate_source(MODELS[model](), CompileOptions(prefix="net", target=target, cuda_emulate=True))
    (tmp_path / "net.h").write_text(emitted.header)
    (tmp_path / "net.c").write_text(emitted.source)
    (tmp_path / "both.c").write_text('#include "net.h"\n#include "net.c"\n')
    if target == "cuda":
        cmd = [shutil.which("g++") or "g++", "-std=c++17", "-x", "c++", "-DONNXC_CUDA_EMULATE"]
    else:
        cmd = [shutil.which("cc") or "gcc", "-std=c11"]
    proc = subprocess.run([*cmd, "-fsyntax-only", "-Werror", "both.c"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_sequence_struct_is_the_helpers():
    """The loader's onnxc_seq is the one the generated code defines."""
    emitted = generate_source(sequence_model(), CompileOptions(prefix="net"))
    struct = re.search(r"typedef struct onnxc_seq \{.*?\} onnxc_seq;", emitted.source, flags=re.S).group(0)
    assert statements(struct) <= statements(abi.cdef("net"))
    assert f"#define ONNXC_SEQ_MAX_RANK {abi.SEQ_MAX_RANK}\n" in emitted.source

