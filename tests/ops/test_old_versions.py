"""Operator versions from before opset 7, and MaxRoiPool.

onnxruntime runs none of these versions except MaxRoiPool-1, so each is compared with a
numpy computation of its spec; MaxRoiPool-1 is also compared with onnxruntime, which checks
the numpy reference that MaxRoiPool-22 is compared with.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_onnxc, run_ort

rng = np.random.default_rng(7)
F = TP.FLOAT


def single(op, inputs, outputs, opset, initializers=(), **attrs):
    node = helper.make_node(op, [n for n, _, _ in inputs] + [i.name for i in initializers],
                            [n for n, _, _ in outputs], **attrs)
    graph_inputs = [(n, t, s) for n, t, s in inputs]
    return make_model([node], graph_inputs, outputs, initializers, opset=opset)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# --- BatchNormalization-1 and -6 --------------------------------------------------------------

def bn_params(c):
    return {"scale": rng.random(c, np.float32) + 0.5, "B": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32), "var": rng.random(c, np.float32) + 0.5}


def bn_inputs(shape, param_shape):
    return [("X", F, shape)] + [(n, F, param_shape) for n in ("scale", "B", "mean", "var")]


@pytest.mark.parametrize("opset,attrs", [(1, {"consumed_inputs": [0, 0, 0, 1, 1]}), (6, {})])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), ("N", 3, 6)])
def test_batch_norm_test_mode(opset, attrs, shape):
    dims = tuple(2 if isinstance(d, str) else d for d in shape)
    x, p = rng.standard_normal(dims).astype(np.float32), bn_params(3)
    m = single("BatchNormalization", bn_inputs(list(shape), [3]), [("Y", F, list(shape))], opset, is_test=1,
               epsilon=1e-3, **attrs)
    (y,) = run_onnxc(m, {"X": x, **p})
    c = (-1,) + (1,) * (x.ndim - 2)
    expected = (x - p["mean"].reshape(c)) / np.sqrt(p["var"].reshape(c) + 1e-3) * p["scale"].reshape(c) + p["B"].reshape(c)
    close(y, expected.astype(np.float32))


def test_batch_norm_6_per_element():
    """spatial=0: scale, B, mean and var have one value per element of a sample (C x H x W)."""
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    p = {k: v.reshape(3, 1).repeat(4, 1) + rng.random((3, 4), np.float32) for k, v in bn_params(3).items()}
    m = single("BatchNormalization", bn_inputs([2, 3, 4], [3, 4]), [("Y", F, [2, 3, 4])], 6, is_test=1, spatial=0)
    (y,) = run_onnxc(m, {"X": x, **p})
    close(y, ((x - p["mean"]) / np.sqrt(p["var"] + 1e-5) * p["scale"] + p["B"]).astype(np.float32))


@pytest.mark.parametrize("opset,attrs", [(1, {"consumed_inputs": [0, 0, 0, 1, 1]}), (6, {})])
def test_batch_norm_training_mode(opset, attrs):
    """is_test=0: normalize with the batch statistics; outputs the running statistics and the
    batch mean and (biased) variance."""
    x, p = rng.standard_normal((4, 3, 5)).astype(np.float32), bn_params(3)
    outputs = [("Y", F, [4, 3, 5])] + [(n, F, [3]) for n in ("rmean", "rvar", "smean", "svar")]
    m = single("BatchNormalization", bn_inputs([4, 3, 5], [3]), outputs, opset, momentum=0.8, **attrs)
    y, rmean, rvar, smean, svar = run_onnxc(m, {"X": x, **p})
    mu, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    c = (-1, 1)
    close(y, ((x - mu.reshape(c)) / np.sqrt(var.reshape(c) + 1e-5) * p["scale"].reshape(c)
              + p["B"].reshape(c)).astype(np.float32), atol=1e-5)
    close(rmean, (p["mean"] * 0.8 + mu * 0.2).astype(np.float32))
    close(rvar, (p["var"] * 0.8 + var * 0.2).astype(np.float32))
    close(smean, mu.astype(np.float32))
    close(svar, var.astype(np.float32))


def test_batch_norm_6_training_per_element_is_unsupported():
    m = single("BatchNormalization", bn_inputs([2, 3], [3]), [("Y", F, [2, 3])], 6, spatial=0)
    with pytest.raises(onnxc.UnsupportedError, match="spatial=0"):
        run_onnxc(m, {"X": np.zeros((2, 3), np.float32), **bn_params(3)})


# --- PRelu-1 and -6 ---------------------------------------------------------------------------

@pytest.mark.parametrize("opset,attrs", [(1, {"consumed_inputs": [0]}), (6, {})])
@pytest.mark.parametrize("x_shape,slope_shape,view", [
    ((2, 3, 4), (1,), (1,)),            # one slope for every channel
    ((2, 3, 4), (3,), (3, 1)),          # one slope per channel (axis 1)
    ((2, 3, 4, 5), (3,), (3, 1, 1)),
    ((2, 3, 4, 5), (5,), (5,)),         # broadcasts like PRelu-7
    ((2, 3, 4), (3, 4), (3, 4)),
])
def test_prelu_old(opset, attrs, x_shape, slope_shape, view):
    x = rng.standard_normal(x_shape).astype(np.float32)
    slope = rng.standard_normal(slope_shape).astype(np.float32)
    m = single("PRelu", [("X", F, list(x_shape)), ("slope", F, list(slope_shape))], [("Y", F, list(x_shape))],
               opset, **attrs)
    (y,) = run_onnxc(m, {"X": x, "slope": slope})
    close(y, np.where(x < 0, x * slope.reshape(view), x))


# --- Pad-1 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"), ("edge", "edge")])
def test_pad_1(mode, np_mode):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    paddings = [0, 1, 2, 1, 0, 3]  # begins of each axis, then ends
    m = single("Pad", [("data", F, [2, 3, 4])], [("output", F, [3, 4, 9])], 1, paddings=paddings, mode=mode,
               value=2.5)
    (y,) = run_onnxc(m, {"data": x})
    kw = {"constant_values": 2.5} if mode == "constant" else {}
    close(y, np.pad(x, [(0, 1), (1, 0), (2, 3)], mode=np_mode, **kw))


def test_pad_1_needs_paddings_per_axis():
    m = single("Pad", [("data", F, [2, 3])], [("output", F, [2, 5])], 1, paddings=[1, 1])
    with pytest.raises(onnxc.ShapeError, match="paddings"):
        run_onnxc(m, {"data": np.zeros((2, 3), np.float32)})


# --- Split-1 ----------------------------------------------------------------------------------

def split_model(x_shape, sizes, split_input=None, **attrs):
    outputs = [(f"y{i}", F, None) for i in range(len(sizes))]
    axis = attrs.get("axis", 0)
    outputs = [(n, t, [s if a == axis else d for a, d in enumerate(x_shape)]) for (n, t, _), s in zip(outputs, sizes)]
    inputs = [("input", F, list(x_shape))]
    inits = []
    if split_input is not None:
        if isinstance(split_input, np.ndarray):
            inits = [numpy_helper.from_array(split_input, "split")]
        else:
            inputs.append(("split", split_input, [len(sizes)]))
    return single("Split", inputs, outputs, 1, inits, **attrs)


@pytest.mark.parametrize("case", ["attribute", "float input", "int64 input", "equal", "default axis"])
def test_split_1(case):
    x = rng.standard_normal((4, 6, 2)).astype(np.float32)
    feeds = {"input": x}
    if case == "attribute":
        m, sizes, axis = split_model(x.shape, [1, 5], axis=1, split=[1, 5]), [1, 5], 1
    elif case == "float input":  # the schema types split like the input
        m, sizes, axis = split_model(x.shape, [2, 4], np.array([2, 4], np.float32), axis=1), [2, 4], 1
    elif case == "int64 input":  # computed at run time
        m, sizes, axis = split_model(x.shape, [3, 3], TP.INT64, axis=1), [3, 3], 1
        feeds["split"] = np.array([3, 3], np.int64)
    elif case == "equal":
        m, sizes, axis = split_model(x.shape, [3, 3], axis=1), [3, 3], 1
    else:  # no axis attribute: axis 0, as from Split-2 on
        m, sizes, axis = split_model(x.shape, [1, 3], split=[1, 3]), [1, 3], 0
    results = run_onnxc(m, feeds)
    for y, e in zip(results, np.split(x, np.cumsum(sizes)[:-1], axis=axis)):
        close(y, e)


def test_split_1_rejects_attribute_and_input():
    m = split_model((4, 6), [2, 4], np.array([2, 4], np.float32), axis=1, split=[2, 4])
    with pytest.raises(onnxc.ShapeError, match="both"):
        run_onnxc(m, {"input": np.zeros((4, 6), np.float32)})


# --- Tile-1 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("tiles_type,axis", [(TP.INT64, 1), (F, -1), (F, 0)])
def test_tile_1_constant(tiles_type, axis):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np_type = np.int64 if tiles_type == TP.INT64 else np.float32
    inits = [numpy_helper.from_array(np.array([3], np_type), "tiles"),
             numpy_helper.from_array(np.array([axis], np_type), "axis")]
    out = list(x.shape)
    out[axis] *= 3
    m = single("Tile", [("input", F, [2, 3, 4])], [("output", F, out)], 1, inits)
    (y,) = run_onnxc(m, {"input": x})
    close(y, np.concatenate([x] * 3, axis=axis))


@pytest.mark.parametrize("tiles", [0, 1, 4])
def test_tile_1_run_time_tiles(tiles):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    m = single("Tile", [("input", F, [2, 3]), ("tiles", F, [1])], [("output", F, [2, "T"])], 1,
               [numpy_helper.from_array(np.array([1], np.float32), "axis")])
    (y,) = run_onnxc(m, {"input": x, "tiles": np.array([tiles], np.float32)})
    close(y, np.concatenate([x] * tiles, axis=1) if tiles else np.zeros((2, 0), np.float32))


def test_tile_1_rejects_fractional_run_time_tiles():
    m = single("Tile", [("input", F, [2, 3]), ("tiles", F, [1])], [("output", F, [2, "T"])], 1,
               [numpy_helper.from_array(np.array([1], np.float32), "axis")])
    with pytest.raises(onnxc.RuntimeFailure, match="whole number"):
        run_onnxc(m, {"input": np.zeros((2, 3), np.float32), "tiles": np.array([1.5], np.float32)})


# --- Upsample-1 -------------------------------------------------------------------------------

def bilinear_asymmetric(x, sh, sw):
    """Upsample-1 bilinear: output pixel (i, j) samples input (i / sh, j / sw), clamped at the edge."""
    n, c, h, w = x.shape
    oh, ow = int(np.floor(h * sh)), int(np.floor(w * sw))
    out = np.zeros((n, c, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            fy, fx = min(i / sh, h - 1), min(j / sw, w - 1)
            y0, x0 = int(fy), int(fx)
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            dy, dx = fy - y0, fx - x0
            out[:, :, i, j] = (x[:, :, y0, x0] * (1 - dy) * (1 - dx) + x[:, :, y0, x1] * (1 - dy) * dx
                               + x[:, :, y1, x0] * dy * (1 - dx) + x[:, :, y1, x1] * dy * dx)
    return out.astype(x.dtype)


@pytest.mark.parametrize("dtype,elem", [(np.float32, F), (np.int32, TP.INT32)])
def test_upsample_1_nearest(dtype, elem):
    x = (rng.standard_normal((1, 2, 3, 4)) * 10).astype(dtype)
    m = single("Upsample", [("X", elem, [1, 2, 3, 4])], [("Y", elem, [1, 2, 6, 12])], 1, height_scale=2.0,
               width_scale=3.0)
    (y,) = run_onnxc(m, {"X": x})
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(3, axis=3))


def test_upsample_1_bilinear():
    x = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
    m = single("Upsample", [("X", F, [2, 1, 3, 4])], [("Y", F, [2, 1, 7, 6])], 1, height_scale=2.5,
               width_scale=1.5, mode="bilinear")
    (y,) = run_onnxc(m, {"X": x})
    close(y, bilinear_asymmetric(x, 2.5, 1.5))


def test_upsample_1_rejects_linear_spelling():
    m = single("Upsample", [("X", F, [1, 1, 2, 2])], [("Y", F, [1, 1, 4, 4])], 1, height_scale=2.0,
               width_scale=2.0, mode="linear")
    with pytest.raises(onnxc.ShapeError, match="bilinear"):
        run_onnxc(m, {"X": np.zeros((1, 1, 2, 2), np.float32)})


# --- MaxRoiPool -------------------------------------------------------------------------------

def max_roi_pool(x, rois, pooled, scale):
    """Fast R-CNN RoI max pooling, written from the spec's description."""
    ph_n, pw_n = pooled
    _, c, h, w = x.shape
    y = np.zeros((len(rois), c, ph_n, pw_n), x.dtype)
    for r, (b, *box) in enumerate(rois):
        x1, y1, x2, y2 = (int(np.round(np.float32(v) * np.float32(scale))) for v in box)
        roi_h, roi_w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bin_h, bin_w = np.float32(roi_h) / np.float32(ph_n), np.float32(roi_w) / np.float32(pw_n)
        for ph in range(ph_n):
            h0 = min(max(int(np.floor(ph * bin_h)) + y1, 0), h)
            h1 = min(max(int(np.ceil((ph + 1) * bin_h)) + y1, 0), h)
            for pw in range(pw_n):
                w0 = min(max(int(np.floor(pw * bin_w)) + x1, 0), w)
                w1 = min(max(int(np.ceil((pw + 1) * bin_w)) + x1, 0), w)
                if h1 > h0 and w1 > w0:
                    y[r, :, ph, pw] = x[int(b), :, h0:h1, w0:w1].max(axis=(1, 2))
    return y


ROIS = np.array([[0, 0, 0, 3, 3], [1, 1, 1, 6, 4], [0, -2, -1, 12, 9], [1, 2.4, 1.6, 2.6, 1.5],
                 [1, 9, 9, 11, 12]], np.float32)  # inside, clipped, sub-pixel, outside X


def roi_model(opset, n_rois="R"):
    return single("MaxRoiPool", [("X", F, [2, 3, 6, 7]), ("rois", F, [n_rois, 5])],
                  [("Y", F, [n_rois, 3, 2, 3])], opset, pooled_shape=[2, 3], spatial_scale=0.8)


def test_max_roi_pool_1_matches_onnxruntime_and_reference():
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    feeds = {"X": x, "rois": ROIS}
    (expected,) = run_ort(roi_model(1), feeds)
    (y,) = run_onnxc(roi_model(1), feeds)
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(max_roi_pool(x, ROIS, (2, 3), 0.8), expected)


def test_max_roi_pool_22_matches_reference():
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    (y,) = run_onnxc(roi_model(22), {"X": x, "rois": ROIS})
    np.testing.assert_array_equal(y, max_roi_pool(x, ROIS, (2, 3), 0.8))


def test_max_roi_pool_rejects_bad_batch_index():
    rois = np.array([[2, 0, 0, 1, 1]], np.float32)
    with pytest.raises(onnxc.RuntimeFailure, match="batch index"):
        run_onnxc(roi_model(22), {"X": np.zeros((2, 3, 6, 7), np.float32), "rois": rois})
