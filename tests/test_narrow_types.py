"""float8, float4 and int4/int2 element types: conversions agree with ml_dtypes bit for bit."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model

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


@pytest.mark.parametrize("to, npd", [(T.INT4, ml_dtypes.int4), (T.UINT4, ml_dtypes.uint4),
                                     (T.INT2, ml_dtypes.int2), (T.UINT2, ml_dtypes.uint2)])
def test_narrow_ints_wrap_like_ml_dtypes(to, npd):
    x = np.array([7.6, 8.0, -9.0, 100.5, -0.7, 3, -1, 0], np.float32)
    y = cast(x, to)
    assert y.dtype == np.dtype(npd)
    np.testing.assert_array_equal(y.astype(np.int32), x.astype(npd).astype(np.int32))
    np.testing.assert_array_equal(cast(y, T.INT32, src=to), y.astype(np.int32))


def test_narrow_constants_in_generated_source(tmp_path):
    c = np.array([1.5, -2, 3, -0.5], dtype=ml_dtypes.float8_e4m3fn)
    i4 = np.array([1, -2, 3, -8], dtype=ml_dtypes.int4)
    m = make_model([helper.make_node("Cast", ["c"], ["a"], to=T.FLOAT), helper.make_node("Cast", ["i4"], ["b"], to=T.FLOAT),
                    helper.make_node("Add", ["a", "b"], ["y"])], [], [("y", T.FLOAT, [4])],
                   [numpy_helper.from_array(c, "c"), numpy_helper.from_array(i4, "i4")], opset=21)
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=0))
    y, = onnxc.InferenceSession(str(tmp_path)).run(None, {})
    np.testing.assert_array_equal(y, c.astype(np.float32) + i4.astype(np.float32))
