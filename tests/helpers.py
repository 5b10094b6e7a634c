"""Shared test helpers: build small models and compare onnxc with onnxruntime."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

import onnxc


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, int, Sequence[Any]]],
               outputs: Sequence[tuple[str, int, Optional[Sequence[Any]]]],
               initializers: Sequence[onnx.TensorProto] = (), opset: int = 21,
               extra_opsets: Optional[dict[str, int]] = None) -> onnx.ModelProto:
    """inputs/outputs: (name, TensorProto elem type, shape with ints/str/None)."""
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)
    return model


def run_onnxc(model: onnx.ModelProto, feeds: dict[str, np.ndarray], **options: Any) -> list[np.ndarray]:
    sess = onnxc.InferenceSession(model.SerializeToString(), **options)
    return sess.run(None, feeds)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-4,
                       atol: float = 1e-5) -> list[np.ndarray]:
    expected = run_ort(model, feeds)
    actual = run_onnxc(model, feeds)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} vs onnxruntime {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} vs onnxruntime {e.shape}"
        if e.dtype.kind in "biuO":  # integers, bools and strings: exactly
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"output {i}")
    return actual


# --- the CUDA build ----------------------------------------------------------------------------

def cuda_session(model: onnx.ModelProto) -> onnxc.InferenceSession:
    """A session on the CUDA build (under emulation in tests without a GPU); fails if refused."""
    sess = onnxc.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
    assert sess.get_providers()[0] == "CUDAExecutionProvider", "the CUDA build was refused"
    return sess


def cuda_launches(sess: onnxc.InferenceSession) -> dict[str, str]:
    """How each node of a CUDA session's build is launched, by node name: "block" (threads
    that meet at barriers), "grid" (a grid of threads) or "serial" (one thread)."""
    import os
    import re
    with open(os.path.join(sess._folder, "model.cu")) as f:
        src = f.read()
    out = {}
    for sync, fn, blocks, threads in re.findall(r"ONNXC_LAUNCH(_SYNC)?\((node\d+_\w+?)_kernel, (\w+), (\d+),", src):
        name = fn.split("_", 2)[2]
        out[name] = "serial" if blocks == "1" and threads == "1" else "block" if sync else "grid"
    return out
