"""SessionOptions.register_custom_ops_library: the generated code calls operators of a
C library written against onnxc_custom_op.h (tests/custom_ops/example_ops.c)."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from onnxc.runtime.custom_ops import header_path

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    out = tmp_path_factory.mktemp("custom") / "libexample_ops.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-I", os.path.dirname(header_path()), os.path.join(HERE, "custom_ops", "example_ops.c"),
                    "-o", str(out)], check=True)
    return str(out)


def model():
    nodes = [helper.make_node("ScaledAdd", ["a", "b"], ["s"], domain="ai.example", alpha=0.5),
             helper.make_node("RepeatRows", ["s"], ["r"], domain="ai.example", times=3),
             helper.make_node("Relu", ["r"], ["y"])]
    return make_model(nodes, [("a", T.FLOAT, ["n", 4]), ("b", T.FLOAT, ["n", 4])], [("y", T.FLOAT, [None, 4])],
                      extra_opsets={"ai.example": 1})


def test_custom_ops_run_in_the_generated_code(library):
    so = onnxc.SessionOptions()
    so.register_custom_ops_library(library)
    sess = onnxc.InferenceSession(model().SerializeToString(), so)
    for n in (1, 3):
        a = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        b = np.random.default_rng(n + 10).standard_normal((n, 4)).astype(np.float32)
        y = sess.run(None, {"a": a, "b": b})[0]
        np.testing.assert_allclose(y, np.maximum(np.tile(a + 0.5 * b, (3, 1)), 0), rtol=1e-6)
    code = open(os.path.join(sess.artifact_dir, "model.c")).read()
    assert "ai.example::ScaledAdd" in code


def test_custom_op_errors_are_reported(library):
    so = onnxc.SessionOptions()
    so.register_custom_ops_library(library)
    nodes = [helper.make_node("ScaledAdd", ["a", "b"], ["y"], domain="ai.example")]
    m = make_model(nodes, [("a", T.FLOAT, ["n"]), ("b", T.FLOAT, ["m"])], [("y", T.FLOAT, [None])],
                   extra_opsets={"ai.example": 1})
    sess = onnxc.InferenceSession(m.SerializeToString(), so)
    with pytest.raises(onnxc.RuntimeFailure, match="same shape"):
        sess.run(None, {"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})


def test_without_the_library_the_op_is_unsupported():
    with pytest.raises(onnxc.UnsupportedError, match="ai.example::ScaledAdd"):
        onnxc.InferenceSession(model().SerializeToString())
    so = onnxc.SessionOptions()
    with pytest.raises(onnxc.InvalidArgument, match="not found"):
        so.register_custom_ops_library("/no/such/library.so")


def test_with_custom_ops_the_cuda_provider_runs_the_model_on_the_cpu(library, monkeypatch):
    """Custom operators are host C functions of the C build: a CUDA session warns and runs the
    model on the CPU, as onnxruntime places nodes no CUDA kernel takes on the CPU."""
    from onnxc.runtime import cuda
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")
    so = onnxc.SessionOptions()
    so.register_custom_ops_library(library)
    with pytest.warns(UserWarning, match="CUDAExecutionProvider cannot run this model.*custom operators"):
        sess = onnxc.InferenceSession(model().SerializeToString(), so, providers=["CUDAExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    a = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(sess.run(None, {"a": a, "b": a})[0], np.full((6, 4), 1.5, np.float32))
