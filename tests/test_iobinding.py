"""IOBinding, OrtValue, run_with_ort_values and run_async, written as for onnxruntime."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model


def model():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"]),
             helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)]
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    return make_model(nodes, [("x", T.FLOAT, ["n", 4])], [("y", T.FLOAT, ["n", 3]), ("s", T.FLOAT, [])],
                      [helper.make_tensor("w", T.FLOAT, [4, 3], w.reshape(-1))], opset=13)


def expected(x):
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    y = np.maximum(x @ w, 0)
    return y, y.sum()


X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def test_ortvalue_wraps_numpy_without_copy():
    v = onnxc.OrtValue.ortvalue_from_numpy(X)
    assert v.numpy() is X
    assert v.shape() == [5, 4] and v.data_type() == "tensor(float)" and v.device_name() == "cpu"
    assert v.is_tensor() and v.has_value()
    empty = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 3], np.int64)
    assert empty.shape() == [2, 3] and empty.data_type() == "tensor(int64)"
    with pytest.raises(onnxc.InvalidArgument, match="not available"):
        onnxc.OrtValue.ortvalue_from_numpy(X, "cuda", 7)   # no such GPU (with or without emulation)


def test_bound_output_buffer_is_written_in_place():
    sess = onnxc.InferenceSession(model().SerializeToString())
    y_buf = np.full((5, 3), -1.0, np.float32)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", X)
    binding.bind_output("y", "cpu", 0, np.float32, list(y_buf.shape), y_buf.ctypes.data)
    binding.bind_output("s")
    sess.run_with_iobinding(binding)
    y, s = expected(X)
    np.testing.assert_allclose(y_buf, y, rtol=1e-6)             # the caller's memory holds the result
    outs = binding.get_outputs()
    assert outs[0].numpy().ctypes.data == y_buf.ctypes.data       # and the OrtValue is that memory
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[1], s, rtol=1e-5)


def test_bind_ortvalues_and_raw_input_pointer():
    sess = onnxc.InferenceSession(model().SerializeToString())
    out = onnxc.OrtValue.ortvalue_from_shape_and_type([5, 3], np.float32)
    binding = sess.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(X.shape), X.ctypes.data)
    binding.bind_ortvalue_output("y", out)
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(out.numpy(), expected(X)[0], rtol=1e-6)
    assert [o.numpy().ctypes.data for o in binding.get_outputs()] == [out.data_ptr()]
    binding.clear_binding_outputs()
    binding.bind_output("s")
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(binding.get_outputs()[0].numpy(), expected(X)[1], rtol=1e-5)
    binding.clear_binding_inputs()
    with pytest.raises(onnxc.InvalidArgument, match="missing"):
        sess.run_with_iobinding(binding)


def test_wrong_output_buffer_type_is_refused():
    sess = onnxc.InferenceSession(model().SerializeToString())
    binding = sess.io_binding()
    binding.bind_cpu_input("x", X)
    binding.bind_ortvalue_output("y", onnxc.OrtValue.ortvalue_from_shape_and_type([5, 3], np.float64))
    with pytest.raises(onnxc.InvalidArgument, match="float"):
        sess.run_with_iobinding(binding)


def test_run_with_ort_values_and_run_async():
    sess = onnxc.InferenceSession(model().SerializeToString())
    outs = sess.run_with_ort_values(["s"], {"x": onnxc.OrtValue.ortvalue_from_numpy(X)})
    np.testing.assert_allclose(outs[0].numpy(), expected(X)[1], rtol=1e-5)
    done = threading.Event()
    got = {}

    def callback(outputs, user_data, err):
        got.update(outputs=outputs, user_data=user_data, err=err)
        done.set()

    sess.run_async(None, {"x": X}, callback, "token")
    assert done.wait(30)
    assert got["err"] == "" and got["user_data"] == "token"
    np.testing.assert_allclose(got["outputs"][0], expected(X)[0], rtol=1e-6)
    done.clear()
    sess.run_async(None, {"x": X[:, :2]}, callback, None)
    assert done.wait(30)
    assert got["outputs"] == [] and "invalid dimensions" in got["err"]


@pytest.mark.skipif(onnxc.runtime.device.available(), reason="needs a machine without a GPU (or emulation)")
def test_output_bound_to_cuda_without_a_gpu_comes_back_on_the_cpu():
    """onnxruntime with no CUDA provider in use returns such an output in CPU memory."""
    import onnxruntime as ort
    bytes_ = model().SerializeToString()
    got = []
    for runtime in (onnxc, ort):
        sess = runtime.InferenceSession(bytes_)
        binding = sess.io_binding()
        binding.bind_cpu_input("x", X)
        binding.bind_output("y", "cuda")
        sess.run_with_iobinding(binding)
        y, = binding.get_outputs()
        got.append((y.device_name(), y.numpy()))
    assert got[0][0] == got[1][0] == "cpu"
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-6)
    np.testing.assert_allclose(got[0][1], expected(X)[0], rtol=1e-6)
