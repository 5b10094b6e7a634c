"""Parallel CUDA kernels of quantization, LRN and TopK (templates/cuda/quantize,
dynamic_quantize, lrn and top_k .cu.j2) on the emulated CUDA build: sizes that take several
blocks, results compared with onnxruntime (or ONNX's reference where onnxruntime cannot take
the model or its types; TopK and the narrow types bit for bit, ties and NaN included), and the generated source checked to launch each node in parallel (a grid of
threads, one block, or a block per row), not one thread.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import make_inferred_model
from helpers import random_normal as rand
from helpers import cuda_launches as launches
from helpers import cuda_session, run_ort
from onnxc.runtime import cuda


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def _comparable(a: np.ndarray) -> np.ndarray:
    """Narrow types (int4, float8, ...) as what numpy compares: integers exactly, floats as float32."""
    if a.dtype.name.startswith(("int4", "uint4", "int2", "uint2")):
        return a.astype(np.int32)
    if a.dtype.name.startswith(("float8", "float4")):
        return a.astype(np.float32)
    return a


def check(model, feeds, expect_launch: dict[str, str], sess=None, rtol=1e-5, atol=1e-6,
          exact: bool = False, reference: bool = False, want=None) -> onnxc.InferenceSession:
    """Run on the emulated CUDA build, compare with onnxruntime (with ONNX's reference evaluator
    where onnxruntime refuses the model or its Python API the types: int4, uint4, float8; or
    with the outputs `want`), and if asked bit for bit; check the launches."""
    sess = sess or cuda_session(model)
    got = sess.run(None, feeds)
    if want is None:
        want = ReferenceEvaluator(model).run(None, feeds) if reference else run_ort(model, feeds)
    names = [o.name for o in model.graph.output]
    for name, g, w in zip(names, got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype and w.dtype == np.uint8 and g.dtype.itemsize == 1:
            g = g.view(np.uint8)   # onnxruntime returns float8 as its bits
        g, w = _comparable(g), _comparable(w)
        assert g.shape == w.shape, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
    if exact:
        for name, g, w in zip(names, got, want):
            g, w = np.asarray(g), np.asarray(w)
            g = g.view(w.dtype) if g.dtype != w.dtype and g.dtype.itemsize == w.dtype.itemsize == 1 else g
            assert g.dtype.itemsize == w.dtype.itemsize and g.shape == w.shape, name
            same = np.ones(g.shape, bool)
            if _comparable(w).dtype.kind == "f":   # (a NaN's sign and payload are not the value)
                nan = np.isnan(_comparable(g).astype(np.float32))
                np.testing.assert_array_equal(nan, np.isnan(_comparable(w).astype(np.float32)), err_msg=name)
                same = ~nan
            np.testing.assert_array_equal(g.view(f"u{g.dtype.itemsize}")[same], w.view(f"u{w.dtype.itemsize}")[same],
                                          err_msg=f"{name} (bit for bit)")
    kinds = launches(sess)
    assert {n: kinds.get(n) for n in expect_launch} == expect_launch
    return sess


def build(nodes, inputs, outputs, inits=(), opset=21):
    return make_inferred_model(nodes, inputs, outputs, inits, opset=opset)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


# --- QuantizeLinear / DequantizeLinear ------------------------------------------------------------

def test_quantize_takes_a_thread_per_element():
    """QuantizeLinear per tensor (uint8, uint16), per axis (int8), blocked (int16), to float8
    (saturating) and from float16; N symbolic where the parameters allow.
    Values reach past every type's range and sit on halves (round half to even)."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zu8"], ["q_u8"], name="TensorU8"),
             helper.make_node("QuantizeLinear", ["x", "s", "zu16"], ["q_u16"], name="TensorU16"),
             helper.make_node("QuantizeLinear", ["x", "s_axis", "z_i8"], ["q_i8"], name="AxisI8", axis=1),
             helper.make_node("QuantizeLinear", ["b", "s_blk", "z_blk"], ["q_i16"], name="BlockedI16", axis=1,
                              block_size=16),
             helper.make_node("QuantizeLinear", ["x", "s", "z_f8"], ["q_f8"], name="Float8"),
             helper.make_node("QuantizeLinear", ["h", "s_h"], ["q_h"], name="Half")]
    rng = np.random.default_rng(1)
    inits = [const("s", np.float32(0.03125)), const("zu8", np.uint8(100)), const("zu16", np.uint16(30000)),
             const("s_axis", rng.uniform(0.01, 0.05, 6).astype(np.float32)),
             const("z_i8", rng.integers(-20, 20, 6).astype(np.int8)),
             const("s_blk", rng.uniform(0.001, 0.01, (3, 3, 9)).astype(np.float32)),
             const("z_blk", rng.integers(-500, 500, (3, 3, 9)).astype(np.int16)),
             numpy_helper.from_array(np.zeros((), ml_dtypes.float8_e4m3fn), "z_f8"),
             const("s_h", np.float16(0.125))]
    model = build(nodes, [("x", TP.FLOAT, ["N", 6, 70]), ("b", TP.FLOAT, [3, 40, 9]), ("h", TP.FLOAT16, ["N", 300])],
                  [(n, t, None) for n, t in (("q_u8", TP.UINT8), ("q_u16", TP.UINT16), ("q_i8", TP.INT8),
                                             ("q_i16", TP.INT16), ("q_f8", TP.FLOAT8E4M3FN),
                                             ("q_h", TP.UINT8))], inits)
    x = rand(2, 6, 70, scale=4)
    x.flat[::7] = np.round(x.flat[::7] * 32) / 32 + 1 / 64   # halves of the per-tensor step
    x.flat[5] = 40.0   # past float8 e4m3fn's largest value (448) after the scale
    feeds = {"x": x, "b": rand(3, 40, 9, seed=2, scale=3), "h": rand(2, 300, seed=3, dtype=np.float16, scale=20)}
    check(model, feeds, {n.name: "grid" for n in nodes})


def test_quantize_to_int4_takes_a_thread_per_element():
    """int4 per axis (a negative axis, N symbolic), uint4 blocked along the last axis (an
    element a byte: no two threads write the same byte), int2, float4 e2m1 and float8 without
    saturation (out of range: NaN), against ONNX's reference."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_last", "z_i4"], ["q_i4"], name="AxisI4", axis=-1),
             helper.make_node("QuantizeLinear", ["b", "s_blk", "z_u4"], ["q_u4"], name="BlockedU4", axis=2,
                              block_size=4),
             helper.make_node("QuantizeLinear", ["x", "s_f8", "z_f8"], ["q_f8"], name="Float8Wrap", saturate=0),
             helper.make_node("QuantizeLinear", ["x", "s_f8", "z_i2"], ["q_i2"], name="Int2"),
             helper.make_node("QuantizeLinear", ["b", "s_f8"], ["q_f4"], name="Float4", output_dtype=TP.FLOAT4E2M1)]
    rng = np.random.default_rng(2)
    inits = [const("s_last", rng.uniform(0.2, 0.5, 70).astype(np.float32)),
             numpy_helper.from_array(rng.integers(-3, 3, 70).astype(ml_dtypes.int4), "z_i4"),
             const("s_blk", rng.uniform(0.2, 0.4, (3, 40, 3)).astype(np.float32)),
             numpy_helper.from_array(rng.integers(0, 15, (3, 40, 3)).astype(ml_dtypes.uint4), "z_u4"),
             const("s_f8", np.float32(0.0078125)),
             numpy_helper.from_array(np.zeros((), ml_dtypes.float8_e4m3fn), "z_f8"),
             numpy_helper.from_array(np.array(-1, ml_dtypes.int2), "z_i2")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 6, 70]), ("b", TP.FLOAT, [3, 40, 9])],
                  [("q_i4", TP.INT4, None), ("q_u4", TP.UINT4, None), ("q_f8", TP.FLOAT8E4M3FN, None),
                   ("q_i2", TP.INT2, None), ("q_f4", TP.FLOAT4E2M1, None)], inits)
    feeds = {"x": rand(2, 6, 70, scale=2), "b": rand(3, 40, 9, seed=2, scale=3)}
    check(model, feeds, {n.name: "grid" for n in nodes}, reference=True, exact=True)


def test_dequantize_takes_a_thread_per_element():
    """DequantizeLinear per tensor (int32 without a zero point, uint16), per axis (int8, N
    symbolic), blocked (uint8) and to float16."""
    nodes = [helper.make_node("DequantizeLinear", ["i32", "s"], ["d_i32"], name="TensorI32"),
             helper.make_node("DequantizeLinear", ["u16", "s", "zu16"], ["d_u16"], name="TensorU16"),
             helper.make_node("DequantizeLinear", ["i8", "s_axis", "z_i8"], ["d_i8"], name="AxisI8", axis=1),
             helper.make_node("DequantizeLinear", ["u8", "s_blk", "z_u8"], ["d_u8"], name="BlockedU8", axis=2,
                              block_size=5),
             helper.make_node("DequantizeLinear", ["i8", "s_h"], ["d_h"], name="ToHalf")]
    rng = np.random.default_rng(4)
    inits = [const("s", np.float32(0.0625)), const("zu16", np.uint16(40000)),
             const("s_axis", rng.uniform(0.01, 0.05, 6).astype(np.float32)),
             const("z_i8", rng.integers(-20, 20, 6).astype(np.int8)),
             const("s_blk", rng.uniform(0.1, 1, (20, 11, 3)).astype(np.float32)),
             const("z_u8", rng.integers(0, 255, (20, 11, 3)).astype(np.uint8)),
             const("s_h", np.float16(0.5))]
    model = build(nodes, [("i32", TP.INT32, [700]), ("u16", TP.UINT16, ["N", 300]), ("i8", TP.INT8, ["N", 6, 70]),
                          ("u8", TP.UINT8, [20, 11, 13])],
                  [("d_i32", TP.FLOAT, None), ("d_u16", TP.FLOAT, None), ("d_i8", TP.FLOAT, None),
                   ("d_u8", TP.FLOAT, None), ("d_h", TP.FLOAT16, None)], inits)
    feeds = {"i32": rng.integers(-2**31, 2**31 - 1, 700, dtype=np.int64).astype(np.int32),
             "u16": rng.integers(0, 65536, (2, 300)).astype(np.uint16),
             "i8": rng.integers(-128, 128, (2, 6, 70)).astype(np.int8),
             "u8": rng.integers(0, 256, (20, 11, 13)).astype(np.uint8)}
    check(model, feeds, {n.name: "grid" for n in nodes}, atol=0, rtol=1e-6)


def test_dequantize_int4_takes_a_thread_per_element():
    """int4 blocked along the first axis, uint4 per axis (N symbolic) and float8 e5m2, against
    ONNX's reference."""
    nodes = [helper.make_node("DequantizeLinear", ["i4", "s_blk", "z_i4"], ["d_i4"], name="BlockedI4", axis=0,
                              block_size=8),
             helper.make_node("DequantizeLinear", ["u4", "s_axis", "z_u4"], ["d_u4"], name="AxisU4", axis=1),
             helper.make_node("DequantizeLinear", ["f8", "s_f8"], ["d_f8"], name="Float8")]
    rng = np.random.default_rng(6)
    inits = [const("s_blk", rng.uniform(0.1, 1, (3, 11, 7)).astype(np.float32)),
             numpy_helper.from_array(rng.integers(-8, 8, (3, 11, 7)).astype(ml_dtypes.int4), "z_i4"),
             const("s_axis", rng.uniform(0.1, 1, 9).astype(np.float32)),
             numpy_helper.from_array(rng.integers(0, 16, 9).astype(ml_dtypes.uint4), "z_u4"),
             const("s_f8", np.float32(0.0625))]
    model = build(nodes, [("i4", TP.INT4, [20, 11, 7]), ("u4", TP.UINT4, ["N", 9, 40]),
                          ("f8", TP.FLOAT8E5M2, [17, 31])],
                  [("d_i4", TP.FLOAT, None), ("d_u4", TP.FLOAT, None), ("d_f8", TP.FLOAT, None)], inits)
    f8 = rand(17, 31, seed=5, scale=5000).astype(ml_dtypes.float8_e5m2)
    f8[3, 4], f8[5, 6] = np.nan, -np.inf
    feeds = {"i4": rng.integers(-8, 8, (20, 11, 7)).astype(ml_dtypes.int4),
             "u4": rng.integers(0, 16, (2, 9, 40)).astype(ml_dtypes.uint4), "f8": f8}
    check(model, feeds, {"BlockedI4": "grid", "AxisU4": "grid", "Float8": "grid"}, reference=True, exact=True)


def test_quantize_parameters_of_run_time_size_are_checked():
    """Blocked parameters with a symbolic number of blocks: each thread checks it (the C
    build's check) before its element; x's blocked axis symbolic too."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="Quantize", axis=1, block_size=16),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="Dequantize", axis=1, block_size=16)]
    model = build(nodes, [("x", TP.FLOAT, [4, "L", 9]), ("s", TP.FLOAT, [4, "B", 9]), ("z", TP.INT8, [4, "B", 9])],
                  [("q", TP.INT8, None), ("d", TP.FLOAT, None)])
    rng = np.random.default_rng(7)
    feeds = {"x": rand(4, 40, 9, scale=3), "s": rng.uniform(0.01, 0.05, (4, 3, 9)).astype(np.float32),
             "z": rng.integers(-50, 50, (4, 3, 9)).astype(np.int8)}
    sess = check(model, feeds, {"Quantize": "grid", "Dequantize": "grid"})
    with pytest.raises(Exception, match="does not fit"):
        sess.run(None, {**feeds, "s": feeds["s"][:, :2], "z": feeds["z"][:, :2]})
    check(model, feeds, {}, sess=sess)   # a failed run leaves the session working


# --- DynamicQuantizeLinear ------------------------------------------------------------------------

def test_dynamic_quantize_takes_one_block():
    """The range over a block of threads, then the quantization: N symbolic; mixed signs, all
    positive (the range widened to 0), all zero (scale 1)."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"], name="Dynamic")
    model = build([node], [("x", TP.FLOAT, ["N", 700])],
                  [("y", TP.UINT8, None), ("scale", TP.FLOAT, None), ("zp", TP.UINT8, None)], opset=20)
    sess = check(model, {"x": rand(3, 700, scale=5)}, {"Dynamic": "block"})
    x = np.abs(rand(2, 700, seed=1)) + 0.5
    x[1, 599] = 9.0   # the maximum in a late thread's share
    check(model, {"x": x}, {}, sess=sess)
    x = -np.abs(rand(5, 700, seed=2))
    x[4, 699] = -7.0
    check(model, {"x": x}, {}, sess=sess)
    check(model, {"x": np.zeros((1, 700), np.float32)}, {}, sess=sess)


# --- LRN ------------------------------------------------------------------------------------------

def lrn(x: np.ndarray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
    """LRN as ONNX defines it, over axis 1 of any rank (in double)."""
    sq = x.astype(np.float64) ** 2
    channels = x.shape[1]
    window = np.stack([sq[:, max(0, c - (size - 1) // 2):min(channels, c + size // 2 + 1)].sum(axis=1)
                       for c in range(channels)], axis=1)
    return (x / (bias + alpha / size * window) ** beta).astype(x.dtype)


def test_lrn_takes_a_thread_per_element():
    """LRN with odd window sizes (windows clipped at both channel ends), N symbolic; an even
    size (one more channel after than before) and a 2-D input, which onnxruntime refuses,
    against the definition."""
    nodes = [helper.make_node("LRN", ["x"], ["odd"], name="Odd", size=3, alpha=2e-3, beta=0.6, bias=1.5),
             helper.make_node("LRN", ["x"], ["wide"], name="Wide", size=31, alpha=0.5, beta=0.9, bias=2.0)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 10, 7, 9])], [("odd", TP.FLOAT, None), ("wide", TP.FLOAT, None)],
                  opset=13)
    check(model, {"x": rand(2, 10, 7, 9, scale=3)}, {"Odd": "grid", "Wide": "grid"})
    nodes = [helper.make_node("LRN", ["x"], ["even"], name="Even", size=4, alpha=0.1),
             helper.make_node("LRN", ["m"], ["flat"], name="Flat", size=5, alpha=0.2, beta=0.5)]
    model = build(nodes, [("x", TP.FLOAT, [2, 10, 7, 9]), ("m", TP.FLOAT, ["N", 300])],
                  [("even", TP.FLOAT, None), ("flat", TP.FLOAT, None)], opset=13)
    x, m = rand(2, 10, 7, 9, seed=1, scale=3), rand(3, 300, seed=2, scale=2)
    check(model, {"x": x, "m": m}, {"Even": "grid", "Flat": "grid"},
          want=[lrn(x, 4, alpha=0.1), lrn(m, 5, alpha=0.2, beta=0.5)])


# --- TopK -----------------------------------------------------------------------------------------

def ties(*shape, seed=0, dtype=np.float32, values=7):
    """Few distinct values: many ties, ordered by index."""
    return np.random.default_rng(seed).integers(-values, values, shape).astype(dtype)


def test_top_k_short_rows_take_a_thread_per_row():
    """Rows of at most 64 elements: largest and smallest along the last axis (N symbolic) and
    along a middle axis, ties and NaN (above every number) included; int64 values."""
    nodes = [helper.make_node("TopK", ["x", "k3"], ["v_l", "i_l"], name="Largest", axis=-1),
             helper.make_node("TopK", ["x", "k3"], ["v_s", "i_s"], name="Smallest", axis=-1, largest=0),
             helper.make_node("TopK", ["m", "k5"], ["v_m", "i_m"], name="Middle", axis=1),
             helper.make_node("TopK", ["q", "k5"], ["v_q", "i_q"], name="Int64", axis=0, largest=0)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 9, 40]), ("m", TP.FLOAT, [3, 20, 37]), ("q", TP.INT64, [64, 9])],
                  [(n, t, None) for n, t in (("v_l", TP.FLOAT), ("i_l", TP.INT64), ("v_s", TP.FLOAT),
                                             ("i_s", TP.INT64), ("v_m", TP.FLOAT), ("i_m", TP.INT64),
                                             ("v_q", TP.INT64), ("i_q", TP.INT64))],
                  [const("k3", np.array([3], np.int64)), const("k5", np.array([5], np.int64))], opset=11)
    x = ties(3, 9, 40)
    x[0, 0, [4, 17, 30]] = np.nan
    x[1, 2, 11] = np.nan
    feeds = {"x": x, "m": ties(3, 20, 37, seed=1), "q": ties(64, 9, seed=2, dtype=np.int64, values=3)}
    check(model, feeds, {"Largest": "grid", "Smallest": "grid", "Middle": "grid", "Int64": "grid"},
          exact=True)


def test_top_k_long_rows_take_a_block_per_row():
    """Rows longer than a chunk of the shared sort (2048) and shorter, contiguous and strided,
    ties and NaN; k known, k an input of run-time value (both schemes compiled, the sort taken),
    and k = n."""
    nodes = [helper.make_node("TopK", ["x", "k50"], ["v_x", "i_x"], name="LongStrided", axis=1),
             helper.make_node("TopK", ["c", "k50"], ["v_c", "i_c"], name="LongContiguous", axis=-1, largest=0),
             helper.make_node("TopK", ["r", "kr"], ["v_r", "i_r"], name="RunTimeK", axis=-1),
             helper.make_node("TopK", ["a", "ka"], ["v_a", "i_a"], name="All", axis=0, largest=0)]
    model = build(nodes, [("x", TP.FLOAT, [2, 5000, 3]), ("c", TP.INT32, ["N", 3000]), ("r", TP.FLOAT, [5, "L"]),
                          ("kr", TP.INT64, [1]), ("a", TP.FLOAT16, [300, 2])],
                  [(n, t, None) for n, t in (("v_x", TP.FLOAT), ("i_x", TP.INT64), ("v_c", TP.INT32),
                                             ("i_c", TP.INT64), ("v_r", TP.FLOAT), ("i_r", TP.INT64),
                                             ("v_a", TP.FLOAT16), ("i_a", TP.INT64))],
                  [const("k50", np.array([50], np.int64)), const("ka", np.array([300], np.int64))], opset=11)
    x = ties(2, 5000, 3, values=40)
    x[1, 4000:4010, 2] = np.nan
    r = rand(5, 700, seed=3)
    r[2, 100:300] = 1.5   # ties among the best
    feeds = {"x": x, "c": ties(2, 3000, seed=1, dtype=np.int32, values=100), "r": r,
             "kr": np.array([130], np.int64), "a": ties(300, 2, seed=2, dtype=np.float16, values=50)}
    sess = check(model, feeds, {"LongStrided": "block", "LongContiguous": "block", "RunTimeK": "block",
                                "All": "block"}, exact=True)
    check(model, {**feeds, "kr": np.array([0], np.int64)}, {}, sess=sess, exact=True)


def test_top_k_larger_than_half_a_chunk_scans_in_rounds():
    """k > 1024 does not fit in shared memory beside a chunk: a block per row finds the elements
    in rounds; k known (two rows), and of run-time value (its model compiles both schemes)."""
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="Rounds", axis=-1),
             helper.make_node("TopK", ["y", "kr"], ["vr", "ir"], name="RunTimeRounds", axis=0, largest=0)]
    model = build(nodes, [("x", TP.FLOAT, [2, 1100]), ("y", TP.FLOAT, [1060, 1]), ("kr", TP.INT64, [1])],
                  [("v", TP.FLOAT, None), ("i", TP.INT64, None), ("vr", TP.FLOAT, None), ("ir", TP.INT64, None)],
                  [const("k", np.array([1025], np.int64))], opset=11)
    x = ties(2, 1100, values=300)
    x[0, 7] = x[1, 1099] = np.nan
    y = ties(1060, 1, seed=1, values=200)
    y[[3, 500]] = np.nan   # (after every number: past the smallest k)
    check(model, {"x": x, "y": y, "kr": np.array([1025], np.int64)}, {"Rounds": "block", "RunTimeRounds": "block"},
          exact=True)


def test_top_k_checks_k_against_a_symbolic_axis():
    """A known k over an axis of run-time size: every thread checks it, as the C build does."""
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="Symbolic", axis=-1, largest=0)
    model = build([node], [("x", TP.FLOAT, [3, "L"])], [("v", TP.FLOAT, None), ("i", TP.INT64, None)],
                  [const("k", np.array([40], np.int64))], opset=11)
    sess = check(model, {"x": ties(3, 700, values=20)}, {"Symbolic": "block"}, exact=True)
    with pytest.raises(Exception, match="k is larger than the axis"):
        sess.run(None, {"x": ties(3, 30)})
    check(model, {"x": ties(3, 40, seed=1)}, {}, sess=sess, exact=True)   # k = n
