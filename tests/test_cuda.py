"""The CUDA build (CUDAExecutionProvider): templates/cuda/model.cu.j2 over the C emitter.

Without a GPU (CI has none) the tests check what can be checked: the session falls back to
the CPU with onnxruntime's warning; provider options are checked; the CUDA source of the ONNX
conformance cases compiles with nvcc, warnings as errors; and the same source, built with the
host compiler and the CUDA runtime emulated (ONNXC_CUDA_EMULATE=1), gives the cases' expected
outputs. Tests marked ``gpu`` run only where a GPU is (see benchmarks/gpu_check.py).
"""
from __future__ import annotations

import os
import re
import shutil
import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import cuda_launches as launches
from helpers import make_model, run_ort
from tools import require_libraries_of, requires
from onnxc.runtime import cuda

CUDA = "CUDAExecutionProvider"
def _has_nvcc() -> bool:
    from onnxc.codegen.toolchain import _nvcc
    return os.path.isfile(_nvcc()) or shutil.which(_nvcc()) is not None


needs_nvcc = requires(_has_nvcc(), "needs nvcc (the CUDA toolkit)")
gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="needs a CUDA GPU")


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    fc = (rng.standard_normal((8 * 4 * 4, 5)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    return make_model(nodes, [("x", TP.FLOAT, ["N", 3, 8, 8])], [("y", TP.FLOAT, ["N", 5])],
                      [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc")], opset=17)


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.delenv(cuda.EMULATE_ENV, raising=False)
    monkeypatch.setattr(cuda, "device_count", lambda: 0)


def test_without_a_gpu_the_session_warns_and_runs_on_the_cpu(no_gpu):
    model = small_cnn()
    with pytest.warns(UserWarning, match="Specified provider 'CUDAExecutionProvider' is not in available provider names"):
        sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA, "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert onnxc.get_available_providers() == ["CPUExecutionProvider"]
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_emulated_cuda_build_matches_onnxruntime(emulated):
    """Exact float32 (use_tf32=0) against onnxruntime's CPU results; TF32, the default, is
    tested in tests/test_cuda_gemm.py."""
    model = small_cnn()
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"device_id": "0", "use_tf32": "0"})])
    assert sess.get_providers() == [CUDA, "CPUExecutionProvider"]
    assert sess.get_provider_options()[CUDA]["device_id"] == "0"
    assert onnxc.get_available_providers()[0] == CUDA
    assert os.path.isfile(os.path.join(sess._folder, "model.cu"))
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_emulated_cuda_build_reports_a_kernel_failure(emulated):
    """A node that fails on the device (an index out of range) fails the run with its message,
    read back from the device's context; the next good run works."""
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    model = make_model([node], [("x", TP.FLOAT, [4, 2]), ("i", TP.INT64, [3])], [("y", TP.FLOAT, [3, 2])])
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(Exception, match="out of range|index"):
        sess.run(None, {"x": x, "i": np.array([0, 9, 1], np.int64)})
    np.testing.assert_array_equal(sess.run(None, {"x": x, "i": np.array([3, 0, 1], np.int64)})[0], x[[3, 0, 1]])


def test_shapes_computed_from_data_run_on_the_host(emulated):
    """NonZero's output size comes from its input's values: the CUDA build computes it on the
    host from a copy of the input, and the kernel on the device."""
    model = make_model([helper.make_node("NonZero", ["x"], ["y"])], [("x", TP.FLOAT, [3, 4])], [("y", TP.INT64, [2, None])])
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.array(np.nonzero(x)))


def test_string_tensors_live_on_the_host_between_device_kernels(emulated):
    """String tensors are arrays of pointers to host strings: the nodes that read or make them
    (StringNormalizer, Equal on strings, Cast to and from strings) run on the host, and the
    numbers they make go to the device for the next kernel. A string constant stays in the
    source, read by the host."""
    nodes = [helper.make_node("StringNormalizer", ["s"], ["u"], name="upper", case_change_action="UPPER"),
             helper.make_node("Equal", ["u", "b"], ["eq"], name="is_b"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["rs"], name="to_text", to=TP.STRING),
             helper.make_node("Cast", ["rs"], ["back"], name="from_text", to=TP.FLOAT),
             helper.make_node("Mul", ["back", "back"], ["y"], name="square")]
    model = make_model(nodes, [("s", TP.STRING, ["N"]), ("x", TP.FLOAT, ["N", 300])],
                       [("u", TP.STRING, ["N"]), ("eq", TP.BOOL, ["N"]), ("rs", TP.STRING, ["N", 300]),
                        ("y", TP.FLOAT, ["N", 300])],
                       initializers=[numpy_helper.from_array(np.array(["B"], object), "b")], opset=19)
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    assert sess.get_providers()[0] == CUDA
    source = open(os.path.join(sess._folder, "model.cu")).read()
    for op in ("StringNormalizer", "Equal", "Cast"):
        assert re.search(rf"ONNXC_HOST_NODE static int node\d+_{op}", source), op
    assert {k: v for k, v in launches(sess).items() if k in ("relu", "square")} == {"relu": "grid", "square": "grid"}
    rng = np.random.default_rng(0)
    for words in (["a", "b", "Ab"], ["B"]):
        feed = {"s": np.array(words, object), "x": rng.standard_normal((len(words), 300)).astype(np.float32)}
        got = sess.run(None, feed)   # (onnxruntime's StringNormalizer needs a locale this machine may lack)
        assert list(got[0]) == [w.upper() for w in words]
        np.testing.assert_array_equal(got[1], np.array([w.upper() == "B" for w in words]))
        relu = np.maximum(feed["x"], 0)
        back = np.vectorize(float)(got[2]).astype(np.float32)   # (the C build's shortest text, as onnxruntime's)
        np.testing.assert_allclose(back, relu, rtol=1e-7)
        np.testing.assert_array_equal(got[3], back * back)


def test_control_flow_runs_on_the_host_between_device_kernels(emulated):
    """A Loop (with an If in its body) between kernels: the CUDA build runs it on the host on
    copies of what it reads, as onnxruntime's CUDA provider does, and its results go back to the
    device for the next kernel. Such a run cannot be a CUDA graph."""
    then = helper.make_graph([helper.make_node("Add", ["s", "x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, [300])])
    other = helper.make_graph([helper.make_node("Sub", ["s", "x"], ["t"])], "else", [],
                              [helper.make_tensor_value_info("t", TP.FLOAT, [300])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Less", ["i", "two"], ["small"]),
         helper.make_node("If", ["small"], ["s_out"], then_branch=then, else_branch=other)],
        "body", [helper.make_tensor_value_info("i", TP.INT64, []), helper.make_tensor_value_info("c", TP.BOOL, []),
                 helper.make_tensor_value_info("s", TP.FLOAT, [300])],
        [helper.make_tensor_value_info("c_out", TP.BOOL, []), helper.make_tensor_value_info("s_out", TP.FLOAT, [300])],
        [numpy_helper.from_array(np.array(2, np.int64), "two")])
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("Loop", ["n", "yes", "x"], ["acc"], body=body),
             helper.make_node("Mul", ["acc", "acc"], ["y"])]
    model = make_model(nodes, [("x0", TP.FLOAT, [300]), ("n", TP.INT64, []), ("yes", TP.BOOL, [])],
                       [("y", TP.FLOAT, [300])], opset=17)
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    assert sess.get_providers()[0] == CUDA
    source = open(os.path.join(sess._folder, "model.cu")).read()
    assert re.search(r"ONNXC_HOST_NODE static int node\d+_Loop", source)
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    for n in (0, 1, 5):
        feed = {"x0": x, "n": np.array(n, np.int64), "yes": np.array(True)}
        np.testing.assert_allclose(sess.run(None, feed)[0], run_ort(model, feed)[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(onnxc.RuntimeFailure, match="cannot use the CUDA Graph.*Loop.*on the host"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"enable_cuda_graph": 1})])


def test_sequences_and_optionals_live_on_the_host_between_device_kernels(emulated):
    """Sequences and optionals are host memory in the CUDA build, as lists of tensors of their own
    sizes: the nodes that make or read them run on the host on copies of the tensors they read,
    and the tensors they make (SequenceAt, ConcatFromSequence, SequenceLength,
    OptionalHasElement) go to the device for the next kernel. A sequence is an input and an
    output of the model too."""
    f = TP.FLOAT
    seq_f = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f, None))
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("SequenceConstruct", ["x", "r"], ["s"], name="construct"),
             helper.make_node("SequenceInsert", ["s", "r"], ["s2"], name="insert"),
             helper.make_node("SequenceAt", ["s2", "at"], ["e"], name="at"),
             helper.make_node("Mul", ["e", "e"], ["y"], name="square"),
             helper.make_node("ConcatFromSequence", ["s2"], ["c"], name="concat", axis=0),
             helper.make_node("Neg", ["c"], ["cn"], name="neg"),
             helper.make_node("SequenceLength", ["given"], ["n"], name="length"),
             helper.make_node("Optional", ["x"], ["o"], name="wrap"),
             helper.make_node("OptionalHasElement", ["o"], ["has"], name="has")]
    graph = helper.make_graph(
        nodes, "seq", [helper.make_tensor_value_info("x", f, ["N", 300]),
                       helper.make_tensor_value_info("at", TP.INT64, []),
                       helper.make_value_info("given", seq_f)],
        [helper.make_tensor_value_info("y", f, ["N", 300]), helper.make_tensor_value_info("cn", f, [None, 300]),
         helper.make_tensor_value_info("n", TP.INT64, []), helper.make_tensor_value_info("has", TP.BOOL, []),
         helper.make_value_info("s2", seq_f)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    assert sess.get_providers()[0] == CUDA
    source = open(os.path.join(sess._folder, "model.cu")).read()
    for op in ("SequenceConstruct", "SequenceInsert", "SequenceAt", "ConcatFromSequence", "SequenceLength",
               "OptionalHasElement"):
        assert re.search(rf"ONNXC_HOST_NODE static int node\d+_{op}", source), op
    assert {k: v for k, v in launches(sess).items() if k in ("relu", "square", "neg")} == \
        {"relu": "grid", "square": "grid", "neg": "grid"}
    rng = np.random.default_rng(0)
    for batch, at in ((2, -1), (3, 0), (1, 2)):
        feed = {"x": rng.standard_normal((batch, 300)).astype(np.float32), "at": np.array(at, np.int64),
                "given": [np.ones((2, 2), np.float32), np.zeros((batch, 1), np.float32)]}
        got, want = sess.run(None, feed), run_ort(model, feed)
        for g, w in zip(got[:4], want[:4]):
            np.testing.assert_array_equal(g, w)
        assert len(got[4]) == 3
        for g, w in zip(got[4], want[4]):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(onnxc.RuntimeFailure, match="sequence position out of range"):
        sess.run(None, {**feed, "at": np.array(7, np.int64)})
    with pytest.raises(onnxc.RuntimeFailure, match="cannot use the CUDA Graph.*on the host"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"enable_cuda_graph": 1})])


def test_provider_options_are_checked(emulated):
    model = small_cnn()
    with pytest.warns(UserWarning, match="unknown provider option 'no_such_option'"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA], provider_options=[{"no_such_option": 1}])
    with pytest.raises(onnxc.InvalidArgument, match="device_id"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"device_id": "zero"})])
    with pytest.raises(onnxc.InvalidArgument, match="arena_extend_strategy"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"arena_extend_strategy": "kDouble"})])
    with pytest.raises(Exception, match="gpu_mem_limit"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"gpu_mem_limit": 1024})])
    sess = onnxc.InferenceSession(model.SerializeToString(),
                                  providers=[(CUDA, {"gpu_mem_limit": str(1 << 30), "arena_extend_strategy": "kSameAsRequested",
                                                     "cudnn_conv_algo_search": "EXHAUSTIVE"})])
    assert sess.get_provider_options()[CUDA]["gpu_mem_limit"] == str(1 << 30)


# --- device buffers --------------------------------------------------------------------------------

def test_io_binding_chains_runs_through_device_buffers(emulated):
    """Inputs bound in GPU memory are read there, outputs bound to "cuda" stay there: one run's
    output is the next run's input without a host copy, as with onnxruntime-gpu."""
    model = make_model([helper.make_node("Add", ["x", "one"], ["y"])], [("x", TP.FLOAT, ["N", 300])],
                       [("y", TP.FLOAT, ["N", 300])], [numpy_helper.from_array(np.ones(300, np.float32), "one")])
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    x = np.random.default_rng(0).standard_normal((3, 300)).astype(np.float32)
    value = onnxc.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    assert value.device_name() == "cuda"
    for _ in range(3):
        binding = sess.io_binding()
        binding.bind_ortvalue_input("x", value)
        binding.bind_output("y", "cuda")
        sess.run_with_iobinding(binding)
        value = binding.get_outputs()[0]
        assert value.device_name() == "cuda" and value.shape() == [3, 300]
    np.testing.assert_allclose(value.numpy(), x + 3, rtol=1e-6)
    # an output bound to a device buffer of its own is written there
    target = onnxc.OrtValue.ortvalue_from_shape_and_type([3, 300], np.float32, "cuda", 0)
    binding = sess.io_binding()
    binding.bind_input("x", "cuda", 0, np.float32, [3, 300], value.data_ptr())
    binding.bind_ortvalue_output("y", target)
    sess.run_with_iobinding(binding)
    assert binding.get_outputs()[0].data_ptr() == target.data_ptr()
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], x + 4, rtol=1e-6)
    # run_with_ort_values takes device values too
    out = sess.run_with_ort_values(["y"], {"x": target})
    np.testing.assert_allclose(out[0].numpy(), x + 5, rtol=1e-6)


def test_an_output_of_data_dependent_size_is_left_on_the_device(emulated):
    model = make_model([helper.make_node("NonZero", ["x"], ["y"])], [("x", TP.FLOAT, [3, 4])], [("y", TP.INT64, [2, None])])
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]], np.float32)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", onnxc.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
    binding.bind_output("y", "cuda")
    sess.run_with_iobinding(binding)
    y = binding.get_outputs()[0]
    assert y.device_name() == "cuda" and y.shape() == [2, 5]
    np.testing.assert_array_equal(y.numpy(), np.array(np.nonzero(x)))


def test_runs_from_many_threads_share_the_weights_and_agree(emulated):
    """Concurrent runs get a context (arena, stream) each, over one device copy of the weights;
    a session on the caller's stream (user_compute_stream) runs the same."""
    model = small_cnn()
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    xs = [np.random.default_rng(i).standard_normal((2, 3, 8, 8)).astype(np.float32) for i in range(4)]
    serial = [sess.run(None, {"x": x})[0] for x in xs]
    errors, results = [], {}

    def work(t: int) -> None:
        try:
            for _ in range(10):
                results.setdefault(t, []).append(sess.run(None, {"x": xs[t]})[0])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    import threading
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for t in range(4):
        for r in results[t]:
            np.testing.assert_array_equal(r, serial[t])
    on_stream = onnxc.InferenceSession(model.SerializeToString(), providers=[
        (CUDA, {"has_user_compute_stream": "1", "user_compute_stream": str(0x1000)})])
    np.testing.assert_array_equal(on_stream.run(None, {"x": xs[0]})[0], serial[0])
    with pytest.raises(onnxc.InvalidArgument, match="user_compute_stream"):
        onnxc.InferenceSession(model.SerializeToString(), providers=[
            (CUDA, {"has_user_compute_stream": "1", "user_compute_stream": "stream0"})])


def test_cuda_graph_is_captured_once_and_replayed_on_the_same_buffers(emulated):
    """enable_cuda_graph: a run on device buffers is captured, then replayed while the buffers and
    dims stay the same (new data in the same input buffer gives new results); other buffers or
    dims capture anew. Runs on host arrays run as usual."""
    b = np.linspace(-1, 1, 300).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 300])], [("y", TP.FLOAT, ["N", 300])],
                       [numpy_helper.from_array(np.array(2, np.float32), "two"), numpy_helper.from_array(b, "b")])
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"enable_cuda_graph": "1"})])
    rng = np.random.default_rng(0)

    def expect(x):
        return np.maximum(x * 2 + b, 0)

    x = rng.standard_normal((2, 300)).astype(np.float32)
    xv = onnxc.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    yv = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 300], np.float32, "cuda", 0)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", xv)
    binding.bind_ortvalue_output("y", yv)
    for _ in range(3):       # capture, then replays on new data in the same buffer
        sess.run_with_iobinding(binding)
        np.testing.assert_allclose(yv.numpy(), expect(x), rtol=1e-6)
        x = rng.standard_normal((2, 300)).astype(np.float32)
        xv.update_inplace(x)
    other = onnxc.OrtValue.ortvalue_from_shape_and_type([2, 300], np.float32, "cuda", 0)
    binding.bind_ortvalue_output("y", other)
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(other.numpy(), expect(x), rtol=1e-6)
    x3 = rng.standard_normal((3, 300)).astype(np.float32)
    binding.bind_ortvalue_input("x", onnxc.OrtValue.ortvalue_from_numpy(x3, "cuda", 0))
    binding.bind_ortvalue_output("y", onnxc.OrtValue.ortvalue_from_shape_and_type([3, 300], np.float32, "cuda", 0))
    sess.run_with_iobinding(binding)
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], expect(x3), rtol=1e-6)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expect(x), rtol=1e-6)
    nonzero = make_model([helper.make_node("NonZero", ["x"], ["y"])], [("x", TP.FLOAT, [3, 4])], [("y", TP.INT64, [2, None])])
    with pytest.raises(onnxc.RuntimeFailure, match="cannot use the CUDA Graph.*on the host"):
        onnxc.InferenceSession(nonzero.SerializeToString(), providers=[(CUDA, {"enable_cuda_graph": 1})])


def test_device_tensors_need_a_gpu(no_gpu):
    with pytest.raises(onnxc.InvalidArgument, match="cuda:0 is not available"):
        onnxc.OrtValue.ortvalue_from_numpy(np.zeros(3, np.float32), "cuda", 0)
    with pytest.raises(onnxc.InvalidArgument, match="not available"):
        onnxc.OrtValue.ortvalue_from_numpy(np.zeros(3, np.float32), "tpu", 0)


# --- conformance ----------------------------------------------------------------------------------

def _passing_cases() -> list[str]:
    """The cases the CPU build passes; ONNXC_CUDA_CASES=REGEX keeps those whose name it matches."""
    from conformance.cases import all_cases, expected_failures
    known = expected_failures()
    pattern = re.compile(os.environ.get("ONNXC_CUDA_CASES", ""))
    return [n for n in sorted(all_cases()) if n not in known and pattern.search(n)]


def _cases(parts: int) -> list:
    """Every passing case, one in ``parts`` of them (by a hash of the name) in CI's slice."""
    return [pytest.param(n, marks=pytest.mark.ci_slice) if zlib.crc32(n.encode()) % parts == 0 else n
            for n in _passing_cases()]


@pytest.mark.conformance
@pytest.mark.cuda_emulated
@pytest.mark.parametrize("name", _cases(20))
def test_conformance_case_on_emulated_cuda(name, tmp_path, emulated):
    """Each case through the CUDA build's source, run with the CUDA runtime emulated on the
    CPU: a twentieth of them in CI, every one with `-m cuda_emulated`."""
    from conformance.cases import all_cases, run_case
    require_libraries_of(all_cases()[name].model)
    try:
        # exact float32: the cases' tolerances are for it (TF32 GEMMs are tested on their own)
        run_case(all_cases()[name], str(tmp_path / "case"), target="cuda", cuda_emulate=True, cuda_tf32=False)
    except onnxc.UnsupportedError as e:
        pytest.skip(f"not on the GPU: {str(e)[:160]}")


NVCC_CHUNKS = 8
NVCC_CI_CHUNKS = (0,)   # an eighth of the cases in CI (about a minute of nvcc per chunk on 2 cores)


@needs_nvcc
@pytest.mark.conformance
@pytest.mark.nvcc
@pytest.mark.parametrize("chunk", [pytest.param(c, marks=pytest.mark.ci_slice) if c in NVCC_CI_CHUNKS else c
                                   for c in range(NVCC_CHUNKS)])
def test_conformance_cases_compile_with_nvcc(chunk, tmp_path, capsys):
    """Every case the CPU build passes: its CUDA source compiles with nvcc, warnings as errors
    (an eighth of them per test, in one translation unit; one of the eight in CI, all eight
    with `-m nvcc`)."""
    from conformance.cases import all_cases
    from conformance.cuda import cuda_sources, nvcc_compile
    mine = [all_cases()[n] for n in _passing_cases()[chunk::NVCC_CHUNKS]]
    for case in mine:
        require_libraries_of(case.model)
    if not mine and os.environ.get("ONNXC_CUDA_CASES"):
        pytest.skip("no case of this chunk matches ONNXC_CUDA_CASES")
    sources, refused = cuda_sources(mine)
    if not sources and os.environ.get("ONNXC_CUDA_CASES"):
        pytest.skip("the CUDA build refuses every case of this chunk that ONNXC_CUDA_CASES selects")
    assert sources
    nvcc_compile(sources, str(tmp_path))
    with capsys.disabled():
        print(f"\nnvcc chunk {chunk}: {len(sources)} cases compiled, {len(refused)} refused by the CUDA build")


def test_gpu_check_script_runs(emulated, tmp_path, capsys):
    """The script a GPU machine runs, on the emulated build: every column it reports is filled."""
    import json
    from onnxc.benchmarks import gpu_check
    assert gpu_check.main(["--no-conformance", "--models", "mlp", "--runs", "1", "--json", str(tmp_path / "g.json")]) == 0
    row = json.loads((tmp_path / "g.json").read_text())["models"][0]
    assert "error" not in row and row["providers"][0] == CUDA
    assert row["max_abs_diff_fp32"] < 1e-4 and row["max_abs_diff"] < 1e-2    # exact float32; TF32
    assert all(row[k] > 0 for k in ("onnxc_gpu_ms", "onnxc_bound_ms", "onnxc_graph_ms", "onnxc_cpu_ms"))
    assert "| mlp | CUDAExecutionProvider |" in capsys.readouterr().out


@gpu
def test_on_the_gpu_matches_onnxruntime(monkeypatch):
    monkeypatch.delenv(cuda.EMULATE_ENV, raising=False)
    model = small_cnn()
    x = np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32)
    exact = onnxc.InferenceSession(model.SerializeToString(), providers=[(CUDA, {"use_tf32": 0})])
    np.testing.assert_allclose(exact.run(None, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    tf32 = onnxc.InferenceSession(model.SerializeToString(), providers=[CUDA])
    np.testing.assert_allclose(tf32.run(None, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-2, atol=1e-3)
