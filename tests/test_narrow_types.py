"""float8, float4 and int4/int2 element types: float8/float4 conversions agree with ml_dtypes bit
for bit; casts to int4/int2 follow onnxruntime's rule, whatever ml_dtypes is installed."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort

FLOATS = [(T.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn), (T.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
          (T.FLOAT8E5M2, ml_dtypes.float8_e5m2), (T.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
          (T.FLOAT4E2M1, ml_dtypes.float4_e2m1fn)]


def samples() -> np.ndarray:
    rng = np.random.default_rng(0)
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 464, 465, 448, 57344, 61440, 61441, 240, 248, 249, 6, 7, 5,
             0.25, 0.75, 1e-9, -1e-9]
    return np.concatenate([rng.standard_normal(2000).astype(np.float32) * s for s in (1e-3, 1, 100, 1e5)]
                          + [np.array(edges, np.float32)])


def cast(x: np.ndarray, to: int, src: int = T.FLOAT, **attrs) -> np.ndarray:
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)], [("x", src, [len(x)])],
                   [("y", to, [len(x)])], opset=21)
    return onnxc.InferenceSession(m).run(None, {"x": x})[0]


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = a.astype(np.float32), b.astype(np.float32)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("to, npd", FLOATS)
@pytest.mark.parametrize("saturate", [0, 1])
def test_float_to_narrow_float_rounds_like_ml_dtypes(to, npd, saturate):
    x = samples()
    y = cast(x, to, saturate=saturate)
    assert y.dtype == np.dtype(npd)
    if saturate and npd is not ml_dtypes.float4_e2m1fn:
        info = ml_dtypes.finfo(npd)
        expected = np.clip(x, info.min, info.max).astype(npd)  # the spec's saturating cast
    else:
        expected = x.astype(npd)
    assert same(y, expected)
    # and back: decoding is exact
    assert same(cast(y, T.FLOAT, src=to), y)


NARROW_INTS = [(T.INT4, ml_dtypes.int4, 4, True), (T.UINT4, ml_dtypes.uint4, 4, False),
               (T.INT2, ml_dtypes.int2, 2, True), (T.UINT2, ml_dtypes.uint2, 2, False)]
# ties both ways, values out of range by a little and by far, beyond int32 and int64, NaN, infinities
NARROW_SAMPLES = [0, 0.4, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.49, 7.5, -7.5, -8.5, 8, -9, 15, 15.5, 16, 17,
                  -17.7, 100.5, -100.5, 3e9, -3e9, 1e19, -1e19, 3.4e38, np.nan, np.inf, -np.inf]


def narrow_rule(values, bits: int, signed: bool) -> list[int]:
    """The documented float -> int4/uint4/int2/uint2 rule (docs/reliability.md), in Python
    integers: round half away from zero, keep the low ``bits`` bits; NaN and infinities give 0."""
    out = []
    for v in values:
        v = float(v)
        if v != v or v in (math.inf, -math.inf):
            out.append(0)
            continue
        r = int(math.floor(abs(v))) + (abs(v) - math.floor(abs(v)) >= 0.5)
        low = (r if v >= 0 else -r) % (1 << bits)
        out.append(low - (1 << bits) if signed and low >= 1 << (bits - 1) else low)
    return out


def cast_twice_ort(x: np.ndarray, src: int, to: int) -> np.ndarray:
    """onnxruntime's Cast to ``to`` read back as int32 (its numpy API has no 4- or 2-bit arrays)."""
    m = make_model([helper.make_node("Cast", ["x"], ["t"], to=to), helper.make_node("Cast", ["t"], ["y"], to=T.INT32)],
                   [("x", src, [len(x)])], [("y", T.INT32, [len(x)])], opset=25)
    return run_ort(m, {"x": x})[0]


@pytest.mark.parametrize("src, src_np", [(T.FLOAT, np.float32), (T.DOUBLE, np.float64), (T.FLOAT16, np.float16)])
@pytest.mark.parametrize("to, npd, bits, signed", NARROW_INTS)
def test_float_to_narrow_ints_round_half_away_and_wrap_like_onnxruntime(src, src_np, to, npd, bits, signed):
    """Casts to the sub-byte integers follow one rule whatever ml_dtypes is installed (its
    out-of-range answer changed in 0.7): onnxruntime's, checked both against the rule itself
    and against onnxruntime."""
    with np.errstate(over="ignore"):
        x = np.array(NARROW_SAMPLES, np.float64).astype(src_np)
    y = cast(x, to, src=src)
    assert y.dtype == np.dtype(npd)
    expected = narrow_rule(x, bits, signed)
    np.testing.assert_array_equal(y.astype(np.int32), expected)
    np.testing.assert_array_equal(y.astype(np.int32), cast_twice_ort(x, src, to))
    np.testing.assert_array_equal(cast(y, T.INT32, src=to), y.astype(np.int32))


@pytest.mark.parametrize("to, npd, bits, signed", NARROW_INTS)
def test_folded_narrow_int_casts_follow_the_same_rule(to, npd, bits, signed):
    """A Cast (and CastLike) of a constant is folded at compile time to what the kernel computes
    at run time, not to what the installed ml_dtypes would compute."""
    x = np.array(NARROW_SAMPLES, np.float32)
    like = np.zeros(1, dtype=npd)
    m = make_model([helper.make_node("Cast", ["c"], ["a"], to=to), helper.make_node("CastLike", ["c", "like"], ["b"])],
                   [], [("a", to, [len(x)]), ("b", to, [len(x)])],
                   [numpy_helper.from_array(x, "c"), numpy_helper.from_array(like, "like")], opset=21)
    a, b = onnxc.InferenceSession(m).run(None, {})
    expected = narrow_rule(x, bits, signed)
    np.testing.assert_array_equal(a.astype(np.int32), expected)
    np.testing.assert_array_equal(b.astype(np.int32), expected)


def test_narrow_constants_in_generated_source(tmp_path):
    c = np.array([1.5, -2, 3, -0.5], dtype=ml_dtypes.float8_e4m3fn)
    i4 = np.array([1, -2, 3, -8], dtype=ml_dtypes.int4)
    m = make_model([helper.make_node("Cast", ["c"], ["a"], to=T.FLOAT), helper.make_node("Cast", ["i4"], ["b"], to=T.FLOAT),
                    helper.make_node("Add", ["a", "b"], ["y"])], [], [("y", T.FLOAT, [4])],
                   [numpy_helper.from_array(c, "c"), numpy_helper.from_array(i4, "i4")], opset=21)
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=0))
    y, = onnxc.InferenceSession(str(tmp_path)).run(None, {})
    np.testing.assert_array_equal(y, c.astype(np.float32) + i4.astype(np.float32))
