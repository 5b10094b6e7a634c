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


def assert_matches_ort_at_sizes(model: onnx.ModelProto, feeds_for: Any, sizes: Sequence[int], rtol: float = 1e-4,
                                atol: float = 1e-5) -> None:
    """One onnxc session run at several sizes of a symbolic dim (``feeds_for(size)``), each
    compared with onnxruntime."""
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in sizes:
        feeds = feeds_for(n)
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            assert a.shape == e.shape
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


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


def make_inferred_model(nodes: Sequence[onnx.NodeProto], inputs, outputs, inits: Sequence[onnx.TensorProto] = (),
                        opset: int = 18, extra_opsets: Optional[dict[str, int]] = None) -> onnx.ModelProto:
    """make_model with the outputs whose shape is given as None typed by ONNX shape inference."""
    from onnx import shape_inference
    model = make_model(nodes, inputs, outputs, inits, opset=opset, extra_opsets=extra_opsets)
    inferred = shape_inference.infer_shapes(model).graph.output
    for o, typed, (_, _, shape) in zip(model.graph.output, inferred, outputs):
        if shape is None:
            o.type.CopyFrom(typed.type)
    return model


def random_normal(*shape: int, seed: int = 0, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def cuda_check(model: onnx.ModelProto, feeds: dict, expect_launch: dict[str, str], sess=None, rtol: float = 1e-5,
               atol: float = 1e-6, ort_model: Optional[onnx.ModelProto] = None, want: Optional[list] = None,
               expect: Optional[dict[str, np.ndarray]] = None, same_dtype: bool = False) -> onnxc.InferenceSession:
    """Run ``model`` on the CUDA build (emulated without a GPU), compare its outputs with
    onnxruntime's (on ``ort_model`` if given: the same model with what onnxruntime needs; or with
    ``want``, the results computed otherwise; ``expect`` replaces the outputs it names, where
    onnxruntime departs from the ONNX reference) and check how the nodes named in
    ``expect_launch`` are launched ("grid", "block" or "serial")."""
    sess = sess or cuda_session(model)
    got = sess.run(None, feeds)
    names = [o.name for o in model.graph.output]
    want = want if want is not None else run_ort(ort_model or model, feeds)
    want = [(expect or {}).get(name, w) for name, w in zip(names, want)]
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape, name
        if same_dtype:
            assert g.dtype == w.dtype, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
    kinds = cuda_launches(sess)
    assert {n: kinds.get(n) for n in expect_launch} == expect_launch
    return sess


def softmax_bfloat16_by_steps(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax of a bfloat16 array as ONNX's reference computes its function body: x - max, its exp
    and the quotient each rounded to bfloat16, the row's sum added up in index order in bfloat16."""
    t = x.dtype

    def rounded(a):
        return np.asarray(a, np.float32).astype(t).astype(np.float32)
    f = np.moveaxis(x.astype(np.float32), axis, 0)
    e = rounded(np.exp(rounded(f - f.max(0))))
    total = np.zeros_like(e[0])
    for row in e:
        total = rounded(total + row)
    return np.moveaxis((e / total).astype(t), 0, axis)
