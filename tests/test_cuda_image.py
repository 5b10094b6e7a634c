"""Parallel CUDA kernels of sampling, image and sequence ops (templates/cuda/grid_sample,
roi_align, deform_conv, affine_grid, max_unpool, center_crop_pad, reverse_sequence, eye_like,
range, dropout and tensor_scatter .cu.j2) on the emulated CUDA build: sizes that take several
blocks, results compared with onnxruntime, and the generated source checked to launch each node
in parallel (a grid of threads, or blocks of threads that meet at barriers), not one thread.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import random_normal as rand
from helpers import make_inferred_model as build
from helpers import cuda_check as check
from helpers import run_ort
from onnxc.runtime import cuda


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def uniform(lo, hi, *shape, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def test_grid_sample_takes_a_thread_per_output():
    """GridSample in every mode and padding: linear with zeros (N symbolic), nearest with border
    and align_corners, cubic with reflection and with border, and 3-D linear with reflection;
    grid positions reach outside the image."""
    nodes = [helper.make_node("GridSample", ["x", "g"], ["lin"], name="LinearZeros", mode="linear"),
             helper.make_node("GridSample", ["x", "g"], ["near"], name="NearestBorder", mode="nearest",
                              padding_mode="border", align_corners=1),
             helper.make_node("GridSample", ["x", "g"], ["cub"], name="CubicReflect", mode="cubic",
                              padding_mode="reflection"),
             helper.make_node("GridSample", ["x", "g"], ["cubb"], name="CubicBorder", mode="cubic",
                              padding_mode="border", align_corners=1),
             helper.make_node("GridSample", ["v", "gv"], ["vol"], name="Volume", mode="linear",
                              padding_mode="reflection")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 3, 9, 11]), ("g", TP.FLOAT, ["N", 8, 13, 2]),
                          ("v", TP.FLOAT, [2, 2, 4, 5, 6]), ("gv", TP.FLOAT, [2, 3, 7, 5, 3])],
                  [("lin", TP.FLOAT, None), ("near", TP.FLOAT, None), ("cub", TP.FLOAT, None),
                   ("cubb", TP.FLOAT, None), ("vol", TP.FLOAT, None)], opset=20)
    feeds = {"x": rand(2, 3, 9, 11), "g": uniform(-1.4, 1.4, 2, 8, 13, 2, seed=1), "v": rand(2, 2, 4, 5, 6, seed=2),
             "gv": uniform(-2.5, 2.5, 2, 3, 7, 5, 3, seed=3)}
    feeds["g"][0, 0, 0] = [0.25, -0.5]   # exact pixel positions and halfway points
    feeds["g"][1, 0, :4] = [[-1, -1], [1, 1], [1 / 11, 0.0], [3 / 11, 2 / 9]]
    check(model, feeds, {"LinearZeros": "grid", "NearestBorder": "grid", "CubicReflect": "grid",
                         "CubicBorder": "grid", "Volume": "grid"}, atol=1e-5)


def test_roi_align_takes_a_thread_per_output():
    """RoiAlign averaging with adaptive sampling (output_half_pixel) and taking the max with a
    fixed sampling ratio (half_pixel), the number of rois symbolic; a batch index out of range
    fails the run."""
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["avg"], name="RoiAvg", output_height=5,
                              output_width=4, spatial_scale=0.5, coordinate_transformation_mode="output_half_pixel"),
             helper.make_node("RoiAlign", ["x", "rois", "bi"], ["mx"], name="RoiMax", mode="max", output_height=3,
                              output_width=6, sampling_ratio=2, coordinate_transformation_mode="half_pixel")]
    model = build(nodes, [("x", TP.FLOAT, [2, 7, 12, 10]), ("rois", TP.FLOAT, ["R", 4]), ("bi", TP.INT64, ["R"])],
                  [("avg", TP.FLOAT, None), ("mx", TP.FLOAT, None)], opset=16)
    rois = np.array([[0, 0, 19, 23], [3.5, 2, 11, 9.5], [-4, -3, 6, 30], [10, 12, 10.5, 12.2], [1, 1, 40, 40]],
                    np.float32)
    feeds = {"x": rand(2, 7, 12, 10), "rois": rois, "bi": np.array([0, 1, 1, 0, 1], np.int64)}
    sess = check(model, feeds, {"RoiAvg": "grid", "RoiMax": "grid"}, atol=1e-5)
    with pytest.raises(Exception, match="batch index out of range"):
        sess.run(None, {**feeds, "bi": np.array([0, 1, 2, 0, 1], np.int64)})


def test_deform_conv_takes_a_block_per_gemm_tile():
    """DeformConv as implicit GEMM tiles: padding and stride (N symbolic); groups, offset groups,
    dilation, mask and bias, with more output channels and points per group than one tile holds."""
    nodes = [helper.make_node("DeformConv", ["x", "w", "off"], ["plain"], name="DeformPlain", pads=[1, 1, 1, 1],
                              strides=[2, 1]),
             helper.make_node("DeformConv", ["x", "wg", "offg", "b", "mask"], ["full"], name="DeformFull",
                              group=2, offset_group=2, dilations=[1, 2], pads=[1, 2, 1, 2])]
    model = build(nodes, [("x", TP.FLOAT, ["N", 4, 9, 10]), ("w", TP.FLOAT, [5, 4, 3, 3]),
                          ("off", TP.FLOAT, ["N", 18, 5, 10]), ("wg", TP.FLOAT, [140, 2, 3, 3]),
                          ("offg", TP.FLOAT, ["N", 36, 9, 10]), ("b", TP.FLOAT, [140]),
                          ("mask", TP.FLOAT, ["N", 18, 9, 10])],
                  [("plain", TP.FLOAT, None), ("full", TP.FLOAT, None)], opset=19)
    feeds = {"x": rand(2, 4, 9, 10), "w": rand(5, 4, 3, 3, seed=1), "off": 2 * rand(2, 18, 5, 10, seed=2),
             "wg": rand(140, 2, 3, 3, seed=3), "offg": 3 * rand(2, 36, 9, 10, seed=4), "b": rand(140, seed=5),
             "mask": uniform(0, 1, 2, 18, 9, 10, seed=6)}
    check(model, feeds, {"DeformPlain": "block", "DeformFull": "block"}, rtol=1e-4, atol=1e-4)


def test_affine_grid_takes_a_thread_per_element():
    """AffineGrid in 2-D (a constant size, N symbolic: checked against size[0]) and 3-D (a run-time
    size), with and without align_corners."""
    nodes = [helper.make_node("AffineGrid", ["t2", "s2"], ["g2"], name="Affine2d"),
             helper.make_node("AffineGrid", ["t2", "s2"], ["g2a"], name="Affine2dCorners", align_corners=1),
             helper.make_node("AffineGrid", ["t3", "s3"], ["g3"], name="Affine3d", align_corners=1),
             helper.make_node("AffineGrid", ["t3", "s3"], ["g3c"], name="Affine3dCenters")]
    model = build(nodes, [("t2", TP.FLOAT, ["N", 2, 3]), ("t3", TP.FLOAT, [2, 3, 4]), ("s3", TP.INT64, [5])],
                  [("g2", TP.FLOAT, ["N", 13, 17, 2]), ("g2a", TP.FLOAT, ["N", 13, 17, 2]),
                   ("g3", TP.FLOAT, [2, None, None, None, 3]), ("g3c", TP.FLOAT, [2, None, None, None, 3])],
                  [numpy_helper.from_array(np.array([2, 1, 13, 17], np.int64), "s2")], opset=20)
    feeds = {"t2": rand(2, 2, 3), "t3": rand(2, 3, 4, seed=1), "s3": np.array([2, 5, 4, 3, 9], np.int64)}
    sess = check(model, feeds, {"Affine2d": "grid", "Affine2dCorners": "grid", "Affine3d": "grid",
                                "Affine3dCenters": "grid"})
    with pytest.raises(Exception, match="size\\[0\\] differs"):
        sess.run(None, {**feeds, "t2": rand(3, 2, 3)})


def test_max_unpool_zeros_and_scatters_in_a_block():
    """MaxUnpool of MaxPool's output and indices (overlapping windows repeat positions), to the
    default shape and to a larger output_shape (each index split into default-shape coordinates,
    as the ONNX reference does: onnxruntime places it flat in the larger shape), and of indices
    from an input (N symbolic); an index outside the output fails the run."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], name="Pool", kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i"], ["u"], name="Unpool", kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i", "shape"], ["us"], name="UnpoolShape", kernel_shape=[3, 3],
                              strides=[2, 2]),
             helper.make_node("MaxUnpool", ["xu", "iu"], ["uu"], name="UnpoolInput", kernel_shape=[2, 2],
                              strides=[2, 2])]
    model = build(nodes, [("x", TP.FLOAT, [2, 3, 21, 17]), ("xu", TP.FLOAT, ["N", 3, 6, 5]),
                          ("iu", TP.INT64, ["N", 3, 6, 5])],
                  [("u", TP.FLOAT, None), ("us", TP.FLOAT, [2, 3, 23, 19]), ("uu", TP.FLOAT, None),
                   ("p", TP.FLOAT, None), ("i", TP.INT64, None)],
                  [numpy_helper.from_array(np.array([2, 3, 23, 19], np.int64), "shape")], opset=11)
    iu = np.random.default_rng(0).permutation(2 * 3 * 12 * 10)[:2 * 3 * 6 * 5].reshape(2, 3, 6, 5)
    feeds = {"x": rand(2, 3, 21, 17), "xu": rand(2, 3, 6, 5, seed=1), "iu": iu.astype(np.int64)}
    p, i = run_ort(model, feeds)[3:]
    assert len(np.unique(i)) < i.size   # positions that windows share
    us = np.zeros((2, 3, 23, 19), np.float32)
    us[np.unravel_index(i.ravel(), (2, 3, 21, 17))] = p.ravel()
    sess = check(model, feeds, {"Unpool": "block", "UnpoolShape": "block", "UnpoolInput": "block"},
                 expect={"us": us})
    with pytest.raises(Exception, match="outside the output"):
        sess.run(None, {**feeds, "iu": np.full((2, 3, 6, 5), 2 * 3 * 12 * 10, np.int64)})


def test_center_crop_pad_takes_a_thread_per_element():
    """CenterCropPad cropping one axis and padding another (a symbolic leading dim untouched),
    on all axes, and to a shape given at run time."""
    nodes = [helper.make_node("CenterCropPad", ["x", "s2"], ["hw"], name="CropPadHW", axes=[1, 2]),
             helper.make_node("CenterCropPad", ["y", "s3"], ["all"], name="CropPadAll"),
             helper.make_node("CenterCropPad", ["y", "sr"], ["run"], name="CropPadRun", axes=[-1, 0])]
    model = build(nodes, [("x", TP.FLOAT, ["N", 13, 8, 3]), ("y", TP.FLOAT, [10, 7, 9]), ("sr", TP.INT64, [2])],
                  [("hw", TP.FLOAT, ["N", 6, 15, 3]), ("all", TP.FLOAT, None), ("run", TP.FLOAT, [None, 7, None])],
                  [numpy_helper.from_array(np.array([6, 15], np.int64), "s2"),
                   numpy_helper.from_array(np.array([13, 4, 9], np.int64), "s3")], opset=18)
    feeds = {"x": rand(3, 13, 8, 3), "y": rand(10, 7, 9, seed=1), "sr": np.array([20, 5], np.int64)}
    check(model, feeds, {"CropPadHW": "grid", "CropPadAll": "grid", "CropPadRun": "grid"})


def test_reverse_sequence_takes_a_thread_per_element():
    """ReverseSequence with time as axis 0 and as axis 1 (rows of several elements, the batch
    symbolic); a length beyond the steps fails the run."""
    nodes = [helper.make_node("ReverseSequence", ["x", "lx"], ["rt"], name="TimeMajor", time_axis=0, batch_axis=1),
             helper.make_node("ReverseSequence", ["y", "ly"], ["rb"], name="BatchMajor", time_axis=1, batch_axis=0)]
    model = build(nodes, [("x", TP.FLOAT, [11, "B", 4, 3]), ("lx", TP.INT64, ["B"]), ("y", TP.INT32, ["C", 40]),
                          ("ly", TP.INT64, ["C"])],
                  [("rt", TP.FLOAT, None), ("rb", TP.INT32, None)], opset=18)
    feeds = {"x": rand(11, 5, 4, 3), "lx": np.array([11, 0, 1, 6, 2], np.int64),
             "y": np.arange(7 * 40, dtype=np.int32).reshape(7, 40), "ly": np.array([40, 1, 0, 17, 39, 2, 25], np.int64)}
    sess = check(model, feeds, {"TimeMajor": "grid", "BatchMajor": "grid"})
    with pytest.raises(Exception, match="sequence length out of range"):
        sess.run(None, {**feeds, "ly": np.array([40, 1, 0, 17, 41, 2, 25], np.int64)})


def test_eye_like_and_range_take_a_thread_per_element():
    """EyeLike above and below the diagonal (with a change of type), Range of floats and of
    integers with a negative step, from run-time bounds."""
    nodes = [helper.make_node("EyeLike", ["m"], ["up"], name="EyeUp", k=3),
             helper.make_node("EyeLike", ["m"], ["down"], name="EyeDown", k=-5, dtype=TP.INT32),
             helper.make_node("Range", ["fs", "fl", "fd"], ["fr"], name="RangeFloat"),
             helper.make_node("Range", ["is", "il", "id"], ["ir"], name="RangeInt")]
    model = build(nodes, [("m", TP.FLOAT, ["R", 23]), ("fs", TP.FLOAT, []), ("fl", TP.FLOAT, []),
                          ("fd", TP.FLOAT, []), ("is", TP.INT64, []), ("il", TP.INT64, []), ("id", TP.INT64, [])],
                  [("up", TP.FLOAT, None), ("down", TP.INT32, None), ("fr", TP.FLOAT, [None]),
                   ("ir", TP.INT64, [None])], opset=18)
    feeds = {"m": rand(30, 23), "fs": np.array(-3.5, np.float32), "fl": np.array(60, np.float32),
             "fd": np.array(0.07, np.float32), "is": np.array(1000, np.int64), "il": np.array(-2000, np.int64),
             "id": np.array(-7, np.int64)}
    check(model, feeds, {"EyeUp": "grid", "EyeDown": "grid", "RangeFloat": "grid", "RangeInt": "grid"}, atol=1e-5)


def test_dropout_copies_with_a_thread_per_element():
    """Dropout at inference with its mask (opsets 13 and 7) and with a run-time training flag
    (false: the copy; true with a nonzero ratio: refused at run time, as the C build does)."""
    nodes = [helper.make_node("Dropout", ["x", "r", "train"], ["y", "mask"], name="DropoutTrainFlag"),
             helper.make_node("Dropout", ["x"], ["y2", "mask2"], name="DropoutPlain")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 300]), ("r", TP.FLOAT, []), ("train", TP.BOOL, [])],
                  [("y", TP.FLOAT, None), ("mask", TP.BOOL, None), ("y2", TP.FLOAT, None), ("mask2", TP.BOOL, None)],
                  opset=13)
    feeds = {"x": rand(3, 300), "r": np.array(0.3, np.float32), "train": np.array(False)}
    sess = check(model, feeds, {"DropoutTrainFlag": "grid", "DropoutPlain": "grid"})
    with pytest.raises(Exception, match="training mode"):
        sess.run(None, {**feeds, "train": np.array(True)})
    old = build([helper.make_node("Dropout", ["x"], ["y", "mask"], name="DropoutOld", ratio=0.2)],
                [("x", TP.FLOAT, [5, 70])], [("y", TP.FLOAT, [5, 70]), ("mask", TP.FLOAT, [5, 70])], opset=7)
    # (onnxruntime's opset-7 mask is zeros; the ONNX reference's, all kept, is ones)
    check(old, {"x": rand(5, 70)}, {"DropoutOld": "grid"}, expect={"mask": np.ones((5, 70), np.float32)})


def test_tensor_scatter_takes_a_thread_per_element():
    """TensorScatter linear with write indices (a symbolic cache length), circular (writes that
    wrap around), without indices, and along a middle axis of a 5-D cache; a linear write past
    the end fails the run."""
    nodes = [helper.make_node("TensorScatter", ["past", "upd", "wi"], ["lin"], name="ScatterLinear"),
             helper.make_node("TensorScatter", ["past", "upd", "wc"], ["circ"], name="ScatterCircular",
                              mode="circular"),
             helper.make_node("TensorScatter", ["past", "upd"], ["zero"], name="ScatterNoIndices"),
             helper.make_node("TensorScatter", ["p5", "u5", "w5"], ["mid"], name="ScatterMiddle", axis=2,
                              mode="circular")]
    model = build(nodes, [("past", TP.FLOAT, [3, 4, "M", 8]), ("upd", TP.FLOAT, [3, 4, 5, 8]), ("wi", TP.INT64, [3]),
                          ("wc", TP.INT64, [3]), ("p5", TP.FLOAT, [2, 3, 9, 4, 5]), ("u5", TP.FLOAT, [2, 3, 4, 4, 5]),
                          ("w5", TP.INT64, [2])],
                  [("lin", TP.FLOAT, [3, 4, "M", 8]), ("circ", TP.FLOAT, [3, 4, "M", 8]),
                   ("zero", TP.FLOAT, [3, 4, "M", 8]), ("mid", TP.FLOAT, None)], opset=24)
    feeds = {"past": rand(3, 4, 12, 8), "upd": rand(3, 4, 5, 8, seed=1), "wi": np.array([0, 7, 3], np.int64),
             "wc": np.array([10, 4, 11], np.int64),
             "p5": rand(2, 3, 9, 4, 5, seed=2), "u5": rand(2, 3, 4, 4, 5, seed=3), "w5": np.array([7, 2], np.int64)}
    sess = check(model, feeds, {"ScatterLinear": "grid", "ScatterCircular": "grid", "ScatterNoIndices": "grid",
                                "ScatterMiddle": "grid"})
    with pytest.raises(Exception, match="write index out of range"):
        sess.run(None, {**feeds, "wi": np.array([0, 8, 3], np.int64)})
