"""Numerics: NaN and Inf go through operators as in onnxruntime; denormals are flushed only with
session.set_denormal_as_zero; integer arithmetic wraps (two's complement, as in onnxruntime and
numpy) with no undefined behaviour in the generated C.

Where onnxruntime is not consistent with itself, onnxc follows numpy (the ONNX reference):
ReduceMax/ReduceMin and ArgMax/ArgMin in onnxruntime keep a NaN only when it comes first in the
reduced row (a compare-and-keep loop), so their results depend on the position of the NaN; onnxc's
are NaN (ArgMax/ArgMin: the index of the first NaN) wherever a NaN is in the row. The tests check
those against numpy, and against onnxruntime where the NaN comes first or there is none.
MaxPool: onnxruntime's result for a window with a NaN also depends on where it is; onnxc's MaxPool
skips NaN (numpy's nanmax), where numpy's max would give NaN. Checked against onnxruntime only on
windows without NaN.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort

HERE = os.path.dirname(os.path.abspath(__file__))
NAN, INF = np.nan, np.inf
X = np.array([NAN, 1, -INF, INF, 0, -1, NAN, 2, 3, -2, INF, NAN, -INF, 5, 0.5, -0.5] * 2,
             np.float32).reshape(1, 2, 4, 4)
Y = np.array([1, NAN, 2, -INF, INF, NAN, -1, 0, NAN, INF, -INF, 3, 3, NAN, NAN, 1] * 2, np.float32).reshape(1, 2, 4, 4)


def _outputs(model: onnx.ModelProto, dtypes: dict[str, int]) -> onnx.ModelProto:
    """Graph outputs named after their nodes, typed, with the ranks shape inference finds."""
    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in inferred.graph.value_info}
    model.graph.ClearField("output")
    model.graph.output.extend(helper.make_tensor_value_info(name, t, [None] * ranks[name]) for name, t in dtypes.items())
    return model


def test_nan_and_inf_propagate_as_in_onnxruntime():
    w = numpy_helper.from_array(np.array([[[[1, 0], [0, 1]], [[0.5, 0.5], [0.5, 0.5]]]] * 2, np.float32), "w")
    lo, hi = numpy_helper.from_array(np.float32(-1.5), "lo"), numpy_helper.from_array(np.float32(2.5), "hi")
    nodes = {
        "Relu": ("Relu", ["x"], {}), "Max": ("Max", ["x", "y"], {}), "Min": ("Min", ["x", "y"], {}),
        "Max3": ("Max", ["x", "y", "x"], {}), "Min3": ("Min", ["y", "x", "y"], {}),
        "Clip": ("Clip", ["x", "lo", "hi"], {}), "Sigmoid": ("Sigmoid", ["x"], {}), "Tanh": ("Tanh", ["x"], {}),
        "Exp": ("Exp", ["x"], {}), "Sqrt": ("Sqrt", ["x"], {}), "Div": ("Div", ["x", "y"], {}),
        "Sign": ("Sign", ["x"], {}), "LeakyRelu": ("LeakyRelu", ["x"], {}), "HardSigmoid": ("HardSigmoid", ["x"], {}),
        "Softmax": ("Softmax", ["x"], {}), "LogSoftmax": ("LogSoftmax", ["x"], {}),
        "ReduceSum": ("ReduceSum", ["x"], {"keepdims": 0}), "AveragePool": ("AveragePool", ["x"], {"kernel_shape": [2, 2]}),
        "GlobalMaxPool": ("GlobalMaxPool", ["x"], {}), "MatMul": ("MatMul", ["x", "y"], {}),
        "Conv": ("Conv", ["x", "w"], {}), "IsNaN": ("IsNaN", ["x"], {}), "IsInf": ("IsInf", ["x"], {}),
        "Cast": ("Cast", ["x"], {"to": T.FLOAT16}),
    }
    m = make_model([helper.make_node(op, ins, [name], **attrs) for name, (op, ins, attrs) in nodes.items()],
                   [("x", T.FLOAT, [1, 2, 4, 4]), ("y", T.FLOAT, [1, 2, 4, 4])], [], [w, lo, hi], opset=17)
    m = _outputs(m, {name: T.BOOL if name.startswith("Is") else T.FLOAT16 if name == "Cast" else T.FLOAT
                     for name in nodes})
    feed = {"x": X, "y": Y}
    expected = run_ort(m, feed)
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feed)
    exact = {"Relu", "Max", "Min", "Max3", "Min3", "Clip", "Sign", "IsNaN", "IsInf", "Cast", "GlobalMaxPool"}
    for name, a, e in zip(nodes, actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, name
        np.testing.assert_array_equal(np.isnan(a.astype(np.float64)), np.isnan(e.astype(np.float64)), err_msg=name)
        if name in exact:
            np.testing.assert_array_equal(a, e, err_msg=name)
        else:
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)
    assert np.isnan(actual[0][0, 0, 0, 0]), "Relu(NaN) is NaN"


def test_nan_in_max_reductions_follows_numpy():
    """See the module's doc: onnxc is numpy's NaN-propagating max/min; onnxruntime agrees on rows
    and windows with no NaN or a NaN first."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["rmax"], axes=[3], keepdims=0),
             helper.make_node("ReduceMin", ["x"], ["rmin"], axes=[3], keepdims=0),
             helper.make_node("ArgMax", ["x"], ["amax"], axis=3, keepdims=0),
             helper.make_node("ArgMin", ["x"], ["amin"], axis=3, keepdims=0),
             helper.make_node("MaxPool", ["x"], ["pool"], kernel_shape=[1, 4])]
    m = _outputs(make_model(nodes, [("x", T.FLOAT, [1, 2, 4, 4])], [], opset=17),
                 {"rmax": T.FLOAT, "rmin": T.FLOAT, "amax": T.INT64, "amin": T.INT64, "pool": T.FLOAT})
    actual = dict(zip(["rmax", "rmin", "amax", "amin", "pool"],
                      onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": X})))
    expected = dict(zip(["rmax", "rmin", "amax", "amin", "pool"], run_ort(m, {"x": X})))
    np.testing.assert_array_equal(actual["rmax"], np.max(X, axis=3))
    np.testing.assert_array_equal(actual["rmin"], np.min(X, axis=3))
    np.testing.assert_array_equal(actual["amax"], np.argmax(X, axis=3))
    np.testing.assert_array_equal(actual["amin"], np.argmin(X, axis=3))
    np.testing.assert_array_equal(actual["pool"][..., 0], np.nanmax(X, axis=3))   # (MaxPool skips NaN)
    consistent = ~np.isnan(X[..., 1:]).any(axis=3) | np.isnan(X[..., 0])   # no NaN, or a NaN first
    assert consistent.any() and not consistent.all()
    for name in ("rmax", "rmin", "amax", "amin"):
        np.testing.assert_array_equal(actual[name][consistent], expected[name][consistent], err_msg=name)
    no_nan = ~np.isnan(X).any(axis=3)
    np.testing.assert_array_equal(actual["pool"][..., 0][no_nan], expected["pool"][..., 0][no_nan])


# --- denormals ------------------------------------------------------------------------------

DENORMAL_A = np.array([1e-39, 1e-20, 1e-38, 3.0], np.float32)   # 1e-39, 1e-38: denormal
DENORMAL_B = np.array([1.0, 1e-20, 0.5, 1e-45], np.float32)     # 1e-20 * 1e-20: a denormal product


def _denormal_model(n: int = 4) -> onnx.ModelProto:
    nodes = [helper.make_node("Mul", ["a", "b"], ["product"]), helper.make_node("Add", ["a", "a"], ["twice"])]
    return make_model(nodes, [("a", T.FLOAT, [n]), ("b", T.FLOAT, [n])], [("product", T.FLOAT, [n]), ("twice", T.FLOAT, [n])])


def _ort_in_fresh_process(flag: str) -> list[list[float]]:
    """onnxruntime applies set_denormal_as_zero to the calling thread only for the first session
    of a process (and to its pool threads), so it runs in a process of its own."""
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import onnxruntime as ort
        sys.path.insert(0, {HERE!r})
        from test_numerics import _denormal_model, DENORMAL_A, DENORMAL_B
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.add_session_config_entry("session.set_denormal_as_zero", {flag!r})
        sess = ort.InferenceSession(_denormal_model().SerializeToString(), so, providers=["CPUExecutionProvider"])
        print(json.dumps([r.astype(float).tolist() for r in sess.run(None, {{"a": DENORMAL_A, "b": DENORMAL_B}})]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("flag", ["0", "1"])
def test_set_denormal_as_zero_matches_onnxruntime(flag):
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 1   # a build without OpenMP: the calling thread alone
    so.add_session_config_entry("session.set_denormal_as_zero", flag)
    sess = onnxc.InferenceSession(_denormal_model().SerializeToString(), so)
    product, twice = sess.run(None, {"a": DENORMAL_A, "b": DENORMAL_B})
    ort_product, ort_twice = _ort_in_fresh_process(flag)
    np.testing.assert_array_equal(product, np.float32(ort_product))
    np.testing.assert_array_equal(twice, np.float32(ort_twice))
    if flag == "1":
        np.testing.assert_array_equal(product, 0)   # denormal operands read as 0 (DAZ), products flushed (FTZ)
        np.testing.assert_array_equal(twice, np.float32([0, 2e-20, 0, 6]))
    else:
        np.testing.assert_array_equal(product, DENORMAL_A * DENORMAL_B)
        assert product[0] != 0 and product[1] != 0 and twice[0] == np.float32(2e-39)
    # the caller's floating-point mode is back after the run: numpy still makes denormals
    assert np.float32(1e-39) * np.float32(1.0) != 0


def test_set_denormal_as_zero_on_every_thread():
    """A MatMul large enough for the parallel GEMM of a two-thread build: each row of denormal
    operands sums to a normal number unless every thread reads them as zero."""
    n = 256
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", T.FLOAT, [n, n]), ("b", T.FLOAT, [n, n])],
                   [("y", T.FLOAT, [n, n])])
    feed = {"a": np.full((n, n), 1e-39, np.float32), "b": np.ones((n, n), np.float32)}
    for flag in ("0", "1"):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = 2
        so.add_session_config_entry("session.set_denormal_as_zero", flag)
        y = onnxc.InferenceSession(m.SerializeToString(), so).run(None, feed)[0]
        if flag == "1":
            assert not y.any()
        else:
            np.testing.assert_allclose(y, np.float32(n * 1e-39), rtol=1e-3)
        assert np.float32(1e-39) * np.float32(1.0) != 0


# --- integer overflow -----------------------------------------------------------------------

INT_TYPES = {np.int8: T.INT8, np.int16: T.INT16, np.int32: T.INT32, np.int64: T.INT64}


def _int_overflow_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    nodes, inputs, outputs, feed = [], [], [], {}
    for np_type, onnx_type in INT_TYPES.items():
        info = np.iinfo(np_type)
        k = np_type.__name__
        feed[f"a_{k}"] = np.array([info.max, info.min, info.min, -1, info.max, 7], np_type)
        feed[f"b_{k}"] = np.array([1, -1, info.min, info.min, info.max, info.max], np_type)
        inputs += [(f"a_{k}", onnx_type, [6]), (f"b_{k}", onnx_type, [6])]
        for op in ("Add", "Sub", "Mul"):
            nodes.append(helper.make_node(op, [f"a_{k}", f"b_{k}"], [f"{op}_{k}"]))
        for op in ("Neg", "Abs"):
            nodes.append(helper.make_node(op, [f"a_{k}"], [f"{op}_{k}"]))
        outputs += [(f"{op}_{k}", onnx_type, [6]) for op in ("Add", "Sub", "Mul", "Neg", "Abs")]
        if np_type in (np.int32, np.int64):   # (ReduceSum takes no narrower integers)
            nodes.append(helper.make_node("ReduceSum", [f"a_{k}"], [f"ReduceSum_{k}"], keepdims=0))
            outputs.append((f"ReduceSum_{k}", onnx_type, []))
    return make_model(nodes, inputs, outputs), feed


def _numpy_wrapped(name: str, feed: dict[str, np.ndarray]) -> np.ndarray:
    op, k = name.split("_")
    a, b = feed[f"a_{k}"], feed[f"b_{k}"]
    with np.errstate(over="ignore"):
        return {"Add": lambda: a + b, "Sub": lambda: a - b, "Mul": lambda: a * b, "Neg": lambda: -a,
                "Abs": lambda: np.abs(a), "ReduceSum": lambda: np.sum(a, dtype=a.dtype)}[op]()


def test_integer_overflow_wraps_like_onnxruntime_and_numpy():
    m, feed = _int_overflow_model()
    expected = run_ort(m, feed)
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feed)
    for out, a, e in zip(m.graph.output, actual, expected):
        assert a.dtype == e.dtype, out.name
        np.testing.assert_array_equal(a, _numpy_wrapped(out.name, feed), err_msg=out.name)
        if out.name == "ReduceSum_int64":
            # onnxruntime's int64 ReduceSum does not wrap here (7, as if summed in double): a divergence
            continue
        np.testing.assert_array_equal(a, e, err_msg=out.name)


def test_generated_c_has_no_signed_overflow_under_ubsan(tmp_path):
    """The toolchain builds with -fwrapv (signed overflow wraps, as the spec's integer ops do), and
    the code does not even need it: integer arithmetic goes through unsigned types. Built with
    UBSan and -fno-wrapv (after the toolchain's flags, so it wins), the overflowing model runs
    without a report."""
    from onnxc.codegen.toolchain import Toolchain
    assert "-fwrapv" in Toolchain().flags()
    sanitize = ("-fsanitize=undefined", "-fno-sanitize=alignment", "-fno-omit-frame-pointer", "-fno-wrapv")
    options = onnxc.CompileOptions(extra_cflags=sanitize, opt="-O1", threads=1)
    m, _ = _int_overflow_model()
    onnxc.compile_model(m, tmp_path / "ubsan", options)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {HERE!r})
        import onnxc
        from test_numerics import _int_overflow_model
        _, feed = _int_overflow_model()
        onnxc.InferenceSession({str(tmp_path / "ubsan")!r}).run(None, feed)
        print("ran")
    """)
    env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=HERE)
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-3000:]
