"""onnxruntime's documented Python examples, unchanged except for the import.

The code of each test reads as onnxruntime's documentation writes it (``import onnxc as
ort``); only the model file is built here.
"""
from __future__ import annotations

import concurrent.futures
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxc as ort


@pytest.fixture
def model_path(tmp_path):
    """input [batch, 3] -> output = input @ W + b, [batch, 2]; metadata set."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [0.5, -1, 2, 0.25, -0.5, 1])
    b = helper.make_tensor("B", TensorProto.FLOAT, [2], [0.1, -0.2])
    graph = helper.make_graph([helper.make_node("Gemm", ["input", "W", "B"], ["output"], name="fc")], "linear",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 2])], [w, b])
    graph.doc_string = "a linear layer"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests",
                              producer_version="1.0", domain="ai.example", model_version=3, doc_string="example")
    model.ir_version = 9
    helper.set_model_props(model, {"author": "onnxc", "license": "Apache-2.0"})
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return str(path)


def reference(x):
    w = np.array([[0.5, -1], [2, 0.25], [-0.5, 1]], np.float32)
    return x @ w + np.array([0.1, -0.2], np.float32)


X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=np.float32)


def test_basic_usage(model_path):
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    output_name = session.get_outputs()[0].name
    result = session.run([output_name], {input_name: X})
    np.testing.assert_allclose(result[0], reference(X), rtol=1e-6)


def test_graph_optimization_levels_and_saving_the_optimized_model(model_path, tmp_path):
    sess_options = ort.SessionOptions()
    sess_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess_options.optimized_model_filepath = str(tmp_path / "optimized_model.onnx")
    session = ort.InferenceSession(model_path, sess_options)
    np.testing.assert_allclose(session.run(None, {"input": X})[0], reference(X), rtol=1e-6)
    onnx.checker.check_model(onnx.load(sess_options.optimized_model_filepath))


def test_advanced_configuration(model_path):
    sess_options = ort.SessionOptions()
    sess_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess_options.intra_op_num_threads = 1
    sess_options.inter_op_num_threads = 1
    sess_options.log_severity_level = 3
    sess_options.enable_mem_pattern = True
    sess_options.enable_cpu_mem_arena = True
    sess_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess_options.add_session_config_entry("session.set_denormal_as_zero", "1")
    session = ort.InferenceSession(model_path, sess_options=sess_options, providers=["CPUExecutionProvider"])
    run_options = ort.RunOptions()
    run_options.log_severity_level = 3
    run_options.run_tag = "request-1"
    np.testing.assert_allclose(session.run(None, {"input": X}, run_options)[0], reference(X), rtol=1e-6)
    assert session.get_session_options().intra_op_num_threads == 1


def test_profiling(model_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = ort.SessionOptions()
    options.enable_profiling = True
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, {"input": X})
    prof_file = session.end_profiling()
    with open(prof_file) as f:
        trace = json.load(f)
    assert sum(1 for e in trace if e["name"] == "model_run") == 3
    assert sum(1 for e in trace if e["name"] == "fc_kernel_time" and e["args"]["op_name"] == "Gemm") == 3


def test_io_binding(model_path):
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    io_binding = session.io_binding()
    io_binding.bind_cpu_input("input", X)
    io_binding.bind_output("output")
    session.run_with_iobinding(io_binding)
    Y = io_binding.copy_outputs_to_cpu()[0]
    np.testing.assert_allclose(Y, reference(X), rtol=1e-6)

    X_ortvalue = ort.OrtValue.ortvalue_from_numpy(X, "cpu", 0)
    Y_ortvalue = ort.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32, "cpu", 0)
    io_binding = session.io_binding()
    io_binding.bind_input(name="input", device_type=X_ortvalue.device_name(), device_id=0, element_type=np.float32,
                          shape=X_ortvalue.shape(), buffer_ptr=X_ortvalue.data_ptr())
    io_binding.bind_output(name="output", device_type=Y_ortvalue.device_name(), device_id=0,
                           element_type=np.float32, shape=Y_ortvalue.shape(), buffer_ptr=Y_ortvalue.data_ptr())
    session.run_with_iobinding(io_binding)
    np.testing.assert_allclose(Y_ortvalue.numpy(), reference(X), rtol=1e-6)


def test_thread_safe_use(model_path):
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    batches = [np.full((n + 1, 3), n, np.float32) for n in range(16)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda x: session.run(None, {"input": x})[0], batches))
    for x, y in zip(batches, results):
        np.testing.assert_allclose(y, reference(x), rtol=1e-6)


def test_dynamic_shapes(model_path):
    session = ort.InferenceSession(model_path)
    assert session.get_inputs()[0].shape == ["batch", 3]
    assert session.get_inputs()[0].type == "tensor(float)"
    for batch in (1, 5, 64):
        x = np.random.default_rng(batch).random((batch, 3), dtype=np.float32)
        assert session.run(None, {"input": x})[0].shape == (batch, 2)


def test_metadata(model_path):
    session = ort.InferenceSession(model_path)
    meta = session.get_modelmeta()
    assert meta.producer_name == "tests"
    assert meta.graph_name == "linear"
    assert meta.domain == "ai.example"
    assert meta.description == "example"
    assert meta.graph_description == "a linear layer"
    assert meta.version == 3
    assert meta.custom_metadata_map == {"author": "onnxc", "license": "Apache-2.0"}
