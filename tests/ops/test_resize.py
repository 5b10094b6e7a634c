"""Resize and Upsample against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def resize_model(x_shape, out_shape, *, scales=None, sizes=None, roi=None, elem=F, opset=19, runtime=(), **attrs):
    """Resize with constant scales/sizes/roi, or graph inputs for those named in ``runtime``."""
    inputs, inits, names = [("X", elem, x_shape)], [], ["X", "", "", ""]
    for i, (name, value, t) in enumerate((("roi", roi, F), ("scales", scales, F), ("sizes", sizes, TensorProto.INT64))):
        if value is None:
            continue
        names[i + 1] = name
        array = np.array(value, dtype=np.float32 if t == F else np.int64)
        if name in runtime:
            inputs.append((name, t, [len(value)]))
        else:
            inits.append(numpy_helper.from_array(array, name))
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["Y"], **attrs)
    out_shape = out_shape or [None] * len(x_shape)
    return make_model([node], inputs, [("Y", elem, out_shape)], inits, opset=opset)


def rand(shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_nearest_scales(coord, nearest_mode):
    # Whole output widths: for fractional ones (scale * in) align_corners follows the ONNX reference,
    # which divides by the fractional width, where onnxruntime uses the integer one.
    m = resize_model([1, 2, 3, 4], None, scales=[1, 1, 2, 1.5], mode="nearest",
                     coordinate_transformation_mode=coord, nearest_mode=nearest_mode)
    assert_matches_ort(m, {"X": rand([1, 2, 3, 4])})


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                   "half_pixel_symmetric"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_linear_cubic_sizes(coord, mode):
    m = resize_model([1, 1, 5, 6], None, sizes=[1, 1, 8, 4], mode=mode, coordinate_transformation_mode=coord)
    assert_matches_ort(m, {"X": rand([1, 1, 5, 6])})


def test_cubic_exclude_outside():
    m = resize_model([1, 1, 4, 4], None, scales=[1, 1, 1.6, 0.8], mode="cubic", cubic_coeff_a=-0.5,
                     exclude_outside=1)
    assert_matches_ort(m, {"X": rand([1, 1, 4, 4])})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_downsample(mode):
    m = resize_model([1, 1, 9, 8], None, sizes=[1, 1, 4, 3], mode=mode, antialias=1)
    assert_matches_ort(m, {"X": rand([1, 1, 9, 8])})


def test_tf_crop_and_resize():
    m = resize_model([1, 1, 4, 5], None, roi=[0, 0, 0.3, -0.2, 1, 1, 1.2, 0.9], sizes=[1, 1, 3, 4], mode="linear",
                     coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    assert_matches_ort(m, {"X": rand([1, 1, 4, 5])})


def test_axes_keep_aspect_ratio():
    for policy in ("not_larger", "not_smaller"):
        m = resize_model([2, 5, 7], None, sizes=[9, 4], axes=[2, 1], keep_aspect_ratio_policy=policy,
                         mode="linear")
        assert_matches_ort(m, {"X": rand([2, 5, 7])})


@pytest.mark.parametrize("dtype,elem", [(np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8),
                                        (np.int32, TensorProto.INT32), (np.float64, TensorProto.DOUBLE)])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_dtypes(dtype, elem, mode):
    m = resize_model([1, 1, 3, 5], None, scales=[1, 1, 2, 0.6], elem=elem, mode=mode)
    x = rand([1, 1, 3, 5], dtype)
    try:
        expected = run_ort(m, {"X": x})[0]
    except Exception:
        pytest.skip("onnxruntime has no kernel for this type")
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # Integer results round half to even like the ONNX reference; onnxruntime may differ by one.
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-6,
                               atol=1 if mode == "linear" and actual.dtype.kind in "iu" else 1e-9)


def test_float16_nearest():
    m = resize_model([1, 3, 4], None, scales=[1, 2, 0.5], elem=TensorProto.FLOAT16, mode="nearest")
    x = rand([1, 3, 4], np.float16)
    y = onnxc.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]
    np.testing.assert_array_equal(y, run_ort(resize_model([1, 3, 4], None, scales=[1, 2, 0.5], mode="nearest"),
                                             {"X": x.astype(np.float32)})[0].astype(np.float16))


def test_symbolic_batch_const_scales():
    m = resize_model(["N", 2, 3, 3], ["N", 2, 6, 6], scales=[1, 1, 2, 2], mode="linear")
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 3):
        x = rand([n, 2, 3, 3])
        np.testing.assert_allclose(sess.run(None, {"X": x})[0], run_ort(m, {"X": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", ["N", 2])
@pytest.mark.parametrize("x_hw, y_hw", [((33, 33), (264, 264)), ((96, 96), (40, 200))])
def test_bilinear_rows_split_between_threads(batch, x_hw, y_hw):
    """A segmentation head's bilinear upsampling (21 planes of 33 x 33 to 264 x 264, as
    DeepLabV3's: chunks of output rows on the threads, each keeping the source rows it resized
    along the width) and fewer output rows than source rows (each output row on the threads,
    with a blended source row of its thread's own): the same bits as one thread, and
    onnxruntime's values."""
    m = resize_model([batch, 21, *x_hw], [batch, 21, *y_hw], sizes=[2, 21, *y_hw], mode="linear")
    x = rand([2, 21, *x_hw])
    runs = []
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.min_threaded_work", "0")   # (split, small as it is)
        runs.append(onnxc.InferenceSession(m.SerializeToString(), so).run(None, {"X": x})[0])
    np.testing.assert_array_equal(runs[0], runs[1])
    # (blended in float: outputs near 0 carry the rounding of the inputs' magnitude)
    np.testing.assert_allclose(runs[1], run_ort(m, {"X": x})[0], rtol=1e-5, atol=1e-5 * float(np.abs(x).max()))


def test_symbolic_fractional_scale():
    m = resize_model([1, 1, "H", "W"], None, scales=[1, 1, 1.5, 0.7], mode="nearest")
    sess = onnxc.InferenceSession(m.SerializeToString())
    for h, w in ((3, 5), (6, 4)):
        x = rand([1, 1, h, w])
        np.testing.assert_array_equal(sess.run(None, {"X": x})[0], run_ort(m, {"X": x})[0])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_runtime_scales_and_sizes(mode):
    ms = resize_model([1, 1, 4, 4], None, scales=[1, 1, 2, 2], runtime=("scales",), mode=mode)
    mz = resize_model([1, 1, 4, 4], None, sizes=[1, 1, 2, 2], runtime=("sizes",), mode=mode)
    x = rand([1, 1, 4, 4])
    sess_s = onnxc.InferenceSession(ms.SerializeToString())
    sess_z = onnxc.InferenceSession(mz.SerializeToString())
    for scales, sizes in (([1, 1, 2, 1.5], [1, 1, 3, 7]), ([1, 1, 0.5, 0.75], [1, 1, 2, 2])):
        feeds = {"X": x, "scales": np.array(scales, np.float32)}
        np.testing.assert_allclose(sess_s.run(None, feeds)[0], run_ort(ms, feeds)[0], rtol=1e-5, atol=1e-5)
        feeds = {"X": x, "sizes": np.array(sizes, np.int64)}
        np.testing.assert_allclose(sess_z.run(None, feeds)[0], run_ort(mz, feeds)[0], rtol=1e-5, atol=1e-5)


def test_negative_size_fails():
    m = resize_model([1, 1, 4, 4], None, sizes=[1, 1, 2, 2], runtime=("sizes",), mode="nearest")
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="negative size"):
        sess.run(None, {"X": rand([1, 1, 4, 4]), "sizes": np.array([1, 1, -2, 2], np.int64)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize10(mode):
    m = resize_model([1, 1, 3, 4], None, scales=[1, 1, 2, 1.5], opset=10, mode=mode)
    m.graph.node[0].input[:] = ["X", "scales"]
    assert_matches_ort(m, {"X": rand([1, 1, 3, 4])})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample9(mode):
    node = helper.make_node("Upsample", ["X", "scales"], ["Y"], mode=mode)
    m = make_model([node], [("X", F, [1, 2, 3, 3])], [("Y", F, [None] * 4)],
                   [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")], opset=9)
    assert_matches_ort(m, {"X": rand([1, 2, 3, 3])})


def test_upsample7_attribute():
    node = helper.make_node("Upsample", ["X"], ["Y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0])
    m = make_model([node], [("X", F, ["N", 2, 3, 3])], [("Y", F, [None] * 4)], opset=7)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 2):
        x = rand([n, 2, 3, 3])
        np.testing.assert_array_equal(sess.run(None, {"X": x})[0], x.repeat(2, axis=2).repeat(2, axis=3))


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
@pytest.mark.parametrize("x_shape, sizes", [([1, 21, 65, 65], [1, 21, 520, 520]),   # a segmentation head's x8
                                            ([2, 3, 17, 9], [2, 3, 5, 30]),
                                            ([3, 16, 11], [3, 16, 23]),
                                            ([7, 6], [13, 4])])
def test_bilinear_over_the_last_two_axes(coord, x_shape, sizes):
    """float32 linear Resize of the last two axes takes the separable loops (more output rows
    than source rows: source rows resized along the width, then blended; else a blended source
    row, then two taps of it per output): up and down, 2-D to 4-D, every coordinate mode."""
    model = resize_model(x_shape, sizes, sizes=sizes, mode="linear", coordinate_transformation_mode=coord)
    x = np.random.default_rng(len(x_shape) * 100 + x_shape[-1]).standard_normal(x_shape).astype(np.float32)
    # (float rounding of the blended rows, against values up to |x|: cancellations leave
    # outputs near 0 whose error is that of the inputs' magnitude)
    assert_matches_ort(model, {"X": x}, atol=1e-5 * float(np.abs(x).max()))


def test_bilinear_with_scales_of_one_at_run_time_takes_the_general_pass():
    """Scales given at run time may be 1 (the axis' table has one tap per output): the
    separable loops need two."""
    model = resize_model([1, 2, 6, 8], None, scales=[1.0, 1.0, 1.0, 2.0], runtime=("scales",), mode="linear")
    x = rand([1, 2, 6, 8])
    for scales in ([1.0, 1.0, 1.0, 2.0], [1.0, 1.0, 1.5, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.5, 2.5]):
        feeds = {"X": x, "scales": np.array(scales, np.float32)}
        got = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
        np.testing.assert_allclose(got, run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_bilinear_with_sizes_at_run_time_for_every_axis():
    """DeepLabV3's export: the sizes of all four axes come at run time (the batch and channels
    kept): the separable loops run where the outer axes turn out unchanged, the general pass
    where they do not (onnxruntime refuses those: the ONNX reference implementation computes them)."""
    from onnx.reference import ReferenceEvaluator
    model = resize_model([1, 3, 5, 7], None, sizes=[1, 3, 20, 28], runtime=("sizes",), mode="linear")
    x = rand([1, 3, 5, 7])
    for sizes in ([1, 3, 20, 28], [1, 3, 3, 9], [1, 5, 20, 28], [2, 3, 10, 14]):
        feeds = {"X": x, "sizes": np.array(sizes, np.int64)}
        got = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
        np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-6)
