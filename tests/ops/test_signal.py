"""DFT, STFT, window functions and MelWeightMatrix against onnxruntime (and numpy where it has no kernel)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

rng = np.random.default_rng(0)
F, D = TensorProto.FLOAT, TensorProto.DOUBLE


def run(model, feeds):
    return onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("out_type", [F, D, TensorProto.FLOAT16, TensorProto.INT32])
def test_window_runtime_size(op, periodic, out_type):
    if op == "BlackmanWindow" and out_type == TensorProto.INT32:
        pytest.skip("its peak 0.42 + 0.5 + 0.08 truncates to 0 or 1 depending on the float rounding")
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic, output_datatype=out_type)
    m = make_model([node], [("size", TensorProto.INT64, [])], [("y", out_type, [None])], opset=17)
    # A 1-point symmetric window is NaN: onnxruntime's integer conversion of it is undefined.
    for size in ((1, 10, 17) if out_type != TensorProto.INT32 else (2, 10, 17)):
        assert_matches_ort(m, {"size": np.array(size, np.int64)}, rtol=1e-3, atol=1e-3)


def test_window_const_size():
    node = helper.make_node("HannWindow", ["size"], ["y"])
    m = make_model([node], [], [("y", F, [8])], [numpy_helper.from_array(np.array(8, np.int32), "size")], opset=17)
    assert_matches_ort(m, {})


def test_window_negative_size_fails():
    node = helper.make_node("HannWindow", ["size"], ["y"])
    m = make_model([node], [("size", TensorProto.INT64, [])], [("y", F, [None])], opset=17)
    with pytest.raises(Exception, match="negative"):
        run(m, {"size": np.array(-1, np.int64)})


def dft17(shape, elem=F, length=None, **attrs):
    inputs = ["x", "dft_length"] if length is not None else ["x"]
    inits = [numpy_helper.from_array(np.array(length, np.int64), "dft_length")] if length is not None else []
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return make_model([node], [("x", elem, shape)], [("y", elem, [None] * len(shape))], inits, opset=17)


@pytest.mark.parametrize("shape,attrs", [
    ([2, 8, 1], {}), ([2, 10, 2], {}), ([2, 8, 3, 1], {"axis": 2}), ([2, 7, 3, 2], {"axis": 1}),
    ([3, 9, 1], {"onesided": 1}), ([2, 8, 2], {"inverse": 1}), ([2, 6, 5, 2], {"inverse": 1, "axis": 2})])
@pytest.mark.parametrize("elem", [F, D])
def test_dft17(shape, attrs, elem):
    x = rng.standard_normal(shape).astype(np.float32 if elem == F else np.float64)
    assert_matches_ort(dft17(shape, elem, **attrs), {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length", [5, 12, 16])
def test_dft17_length(length):
    x = rng.standard_normal([2, 8, 2]).astype(np.float32)
    assert_matches_ort(dft17([2, 8, 2], length=length), {"x": x}, rtol=1e-4, atol=1e-4)


def test_dft_irfft_and_float16_against_numpy():
    spec = rng.standard_normal([2, 5, 3, 2]).astype(np.float32)
    y = run(dft17([2, 5, 3, 2], axis=1, inverse=1, onesided=1), {"x": spec})[0]
    expected = np.fft.irfft(spec[..., 0] + 1j * spec[..., 1], n=8, axis=1)[..., None]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    x = rng.standard_normal([1, 6, 1]).astype(np.float16)
    y = run(dft17([1, 6, 1], TensorProto.FLOAT16), {"x": x})[0]
    z = np.fft.fft(x[..., 0].astype(np.float64), axis=1)
    np.testing.assert_allclose(y.astype(np.float64), np.stack([z.real, z.imag], -1), rtol=1e-2, atol=1e-2)


def test_dft17_symbolic_batch():
    m = dft17(["N", 8, 1], onesided=1)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 3):
        x = rng.standard_normal([n, 8, 1]).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [1, -2, -3])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("const_axis", [True, False])
def test_dft20_axis(axis, onesided, const_axis):
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=onesided)
    inputs, inits = [("x", F, [2, 6, 4, 1])], []
    if const_axis:
        inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
    else:
        inputs.append(("axis", TensorProto.INT64, []))
    m = make_model([node], inputs, [("y", F, [None] * 4)], inits, opset=20)
    feeds = {"x": rng.standard_normal([2, 6, 4, 1]).astype(np.float32)}
    if not const_axis:
        feeds["axis"] = np.array(axis, np.int64)
    assert_matches_ort(m, feeds, rtol=1e-4, atol=1e-4)


def test_dft20_runtime_length_and_bad_axis():
    node = helper.make_node("DFT", ["x", "n", "axis"], ["y"])
    m = make_model([node], [("x", F, [2, 6, 1]), ("n", TensorProto.INT64, []), ("axis", TensorProto.INT64, [])],
                   [("y", F, [None] * 3)], opset=20)
    x = rng.standard_normal([2, 6, 1]).astype(np.float32)
    for n in (4, 9):
        assert_matches_ort(m, {"x": x, "n": np.array(n, np.int64), "axis": np.array(1, np.int64)},
                           rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="axis"):
        run(m, {"x": x, "n": np.array(4, np.int64), "axis": np.array(2, np.int64)})


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window", [False, True])
@pytest.mark.parametrize("elem", [F, D])
def test_stft(onesided, with_window, elem):
    np_type = np.float32 if elem == F else np.float64
    names = ["signal", "step", "window" if with_window else "", "" if with_window else "length"]
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    inputs = [("signal", elem, ["N", 64, 1]), ("step", TensorProto.INT64, [])]
    inputs.append(("window", elem, [16]) if with_window else ("length", TensorProto.INT64, []))
    m = make_model([node], inputs, [("y", elem, [None] * 4)], opset=17)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 2):
        feeds = {"signal": rng.standard_normal([n, 64, 1]).astype(np_type), "step": np.array(8, np.int64)}
        if with_window:
            feeds["window"] = np.hanning(16).astype(np_type)
        else:
            feeds["length"] = np.array(16, np.int64)
        np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(m, feeds)[0], rtol=1e-4, atol=1e-4)


def test_mel_weight_matrix():
    node = helper.make_node("MelWeightMatrix", ["bins", "n", "rate", "lo", "hi"], ["y"])
    inputs = [("bins", TensorProto.INT64, []), ("n", TensorProto.INT64, []), ("rate", TensorProto.INT64, []),
              ("lo", F, []), ("hi", F, [])]
    m = make_model([node], inputs, [("y", F, [None, None])], opset=17)
    for bins, n in ((8, 64), (12, 256)):
        assert_matches_ort(m, {"bins": np.array(bins, np.int64), "n": np.array(n, np.int64),
                               "rate": np.array(16000, np.int64), "lo": np.array(0, np.float32),
                               "hi": np.array(8000, np.float32)})
