"""Parallel CUDA kernels of pooling, resizing and data movement (templates/cuda/pool,
pool_planes, resize, gather, gather_elements, gather_nd, scatter_elements, scatter_nd, copy,
strided_copy, slice, concat, split, pad, tile, prelu, one_hot, trilu and fill .cu.j2) on the
emulated CUDA build: sizes that take several blocks, results compared with onnxruntime, and the
generated source checked to launch each node in parallel (a grid of threads, or for the
scatters one block), not one thread.
"""
from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import random_normal as rand
from helpers import make_inferred_model as build
from helpers import cuda_check as check
from helpers import cuda_launches as launches
from helpers import cuda_session, make_model, run_ort
from onnxc.runtime import cuda

CUDA = "CUDAExecutionProvider"


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def test_pools_take_a_thread_per_output():
    """MaxPool with Indices, AveragePool with pads, LpPool in 3-D (c/pool.c.j2) and the float32
    2-D pools of c/pool_planes.c.j2 (static sizes, strides, dilations, padding), N symbolic."""
    nodes = [helper.make_node("MaxPool", ["x"], ["mp", "mi"], name="MaxIdx", kernel_shape=[3, 3], strides=[2, 1],
                              pads=[1, 0, 1, 2]),
             helper.make_node("AveragePool", ["x"], ["ap"], name="AvgPad", kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                              count_include_pad=1),
             helper.make_node("LpPool", ["v"], ["lp"], name="Lp3d", kernel_shape=[2, 2, 2], p=3)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 3, 13, 11]), ("v", TP.FLOAT, [2, 3, 5, 6, 7])],
                       [("mp", TP.FLOAT, None), ("mi", TP.INT64, None), ("ap", TP.FLOAT, None), ("lp", TP.FLOAT, None)],
                       opset=18)
    check(model, {"x": rand(2, 3, 13, 11), "v": rand(2, 3, 5, 6, 7, seed=1)},
          {"MaxIdx": "grid", "AvgPad": "grid", "Lp3d": "grid"})
    planes = [helper.make_node("MaxPool", ["x"], ["m"], name="MaxPlanes", kernel_shape=[3, 2], strides=[2, 3],
                               dilations=[2, 1], pads=[2, 1, 1, 1]),
              helper.make_node("AveragePool", ["x"], ["a"], name="AvgPlanes", kernel_shape=[3, 3], strides=[2, 2],
                               pads=[1, 1, 1, 1], ceil_mode=1)]
    model = build(planes, [("x", TP.FLOAT, [3, 5, 17, 19])], [("m", TP.FLOAT, None), ("a", TP.FLOAT, None)],
                       opset=18)
    x = rand(3, 5, 17, 19, seed=2)
    x[0, 0, 3, 4] = np.nan
    check(model, {"x": x}, {"MaxPlanes": "grid", "AvgPlanes": "grid"})


def test_resize_takes_a_thread_per_output():
    """Nearest, linear and cubic Resize (scales from an input: run-time tables in C) of a 4-D
    tensor, and tf_crop_and_resize with extrapolation."""
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["near"], name="Nearest", mode="nearest",
                              nearest_mode="round_prefer_ceil", coordinate_transformation_mode="asymmetric"),
             helper.make_node("Resize", ["x", "", "s"], ["lin"], name="Linear", mode="linear"),
             helper.make_node("Resize", ["x", "", "s"], ["cub"], name="Cubic", mode="cubic", exclude_outside=1),
             helper.make_node("Resize", ["x", "roi", "", "sz"], ["crop"], name="Crop", mode="linear",
                              coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)]
    model = build(nodes, [("x", TP.FLOAT, [2, 3, 7, 9]), ("s", TP.FLOAT, [4])],
                       [("near", TP.FLOAT, None), ("lin", TP.FLOAT, None), ("cub", TP.FLOAT, None),
                        ("crop", TP.FLOAT, None)],
                       [numpy_helper.from_array(np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32), "roi"),
                        numpy_helper.from_array(np.array([2, 3, 11, 8], np.int64), "sz")], opset=19)
    check(model, {"x": rand(2, 3, 7, 9), "s": np.array([1, 1, 1.75, 0.625], np.float32)},
          {"Nearest": "grid", "Linear": "grid", "Cubic": "grid", "Crop": "grid"}, atol=1e-5)


def test_gathers_take_a_thread_per_output():
    """Gather along a middle axis (negative indices), GatherElements and GatherND with batch dims."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], name="Gather", axis=1),
             helper.make_node("GatherElements", ["x", "e"], ["ge"], name="GatherElements", axis=2),
             helper.make_node("GatherND", ["x", "nd"], ["gnd"], name="GatherND", batch_dims=1)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 9, 31]), ("i", TP.INT64, [5]), ("e", TP.INT64, ["N", 9, 12]),
                               ("nd", TP.INT64, ["N", 4, 1])],
                       [("g", TP.FLOAT, None), ("ge", TP.FLOAT, None), ("gnd", TP.FLOAT, None)], opset=18)
    rng = np.random.default_rng(0)
    feeds = {"x": rand(3, 9, 31), "i": np.array([0, -1, 4, 8, -9], np.int64),
             "e": rng.integers(-31, 31, (3, 9, 12)), "nd": rng.integers(-9, 9, (3, 4, 1))}
    sess = check(model, feeds, {"Gather": "grid", "GatherElements": "grid", "GatherND": "grid"})
    for name, bad in (("i", np.array([0, 1, 9, 2, 3], np.int64)), ("nd", np.full((3, 4, 1), -10, np.int64))):
        with pytest.raises(Exception, match="index out of range"):
            sess.run(None, {**feeds, name: bad})
    check(model, feeds, {}, sess=sess)   # a failed run leaves the session working


def test_copies_take_a_thread_per_element():
    """Transpose, Slice (constant and run-time parameters), Expand, DepthToSpace, Reshape and
    Squeeze over tensors of a few thousand elements."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="Transpose", perm=[2, 0, 1]),
             helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["sc"], name="SliceConst"),
             helper.make_node("Slice", ["x", "rs", "re"], ["sr"], name="SliceRun"),
             helper.make_node("Expand", ["b", "shape"], ["ex"], name="Expand"),
             helper.make_node("DepthToSpace", ["d"], ["ds"], name="DepthToSpace", blocksize=2, mode="CRD"),
             helper.make_node("Reshape", ["t", "rshape"], ["rs_out"], name="Reshape"),
             helper.make_node("Squeeze", ["q", "sq_axes"], ["sq"], name="Squeeze")]
    inits = [numpy_helper.from_array(np.array([1, -2, 0], np.int64), "st"),
             numpy_helper.from_array(np.array([100, 0, 40], np.int64), "en"),
             numpy_helper.from_array(np.array([0, 2, 1], np.int64), "ax"),
             numpy_helper.from_array(np.array([2, -3, 1], np.int64), "sp"),
             numpy_helper.from_array(np.array([5, 1, 70], np.int64), "shape"),
             numpy_helper.from_array(np.array([-1, 8], np.int64), "rshape"),
             numpy_helper.from_array(np.array([1], np.int64), "sq_axes")]
    model = build(nodes, [("x", TP.FLOAT, [6, 10, 40]), ("rs", TP.INT64, [2]), ("re", TP.INT64, [2]),
                               ("b", TP.FLOAT, [4, 1]), ("d", TP.FLOAT, [2, 8, 9, 11]), ("q", TP.FLOAT, ["N", 1, 300])],
                       [("t", TP.FLOAT, None), ("sc", TP.FLOAT, None), ("sr", TP.FLOAT, None), ("ex", TP.FLOAT, None),
                        ("ds", TP.FLOAT, None), ("rs_out", TP.FLOAT, None), ("sq", TP.FLOAT, None)], inits, opset=18)
    feeds = {"x": rand(6, 10, 40), "rs": np.array([1, -30], np.int64), "re": np.array([6, 39], np.int64),
             "b": rand(4, 1, seed=1), "d": rand(2, 8, 9, 11, seed=2), "q": rand(3, 1, 300, seed=3)}
    check(model, feeds, {"Transpose": "grid", "SliceConst": "grid", "SliceRun": "grid", "Expand": "grid",
                         "DepthToSpace": "grid", "Reshape": "grid", "Squeeze": "grid"})


def test_concat_split_pad_and_tile_take_a_thread_per_element():
    """Concat and Split along a middle axis (a symbolic outer dim), Pad in every mode (constant
    with run-time pads), Tile."""
    nodes = [helper.make_node("Concat", ["a", "b", "a"], ["c"], name="Concat", axis=1),
             helper.make_node("Split", ["c", "parts"], ["s0", "s1", "s2"], name="Split", axis=1),
             helper.make_node("Pad", ["p", "pads_c", "v"], ["pc"], name="PadConst", mode="constant"),
             helper.make_node("Pad", ["p", "pads"], ["pr"], name="PadReflect", mode="reflect"),
             helper.make_node("Pad", ["p", "pads"], ["pe"], name="PadEdge", mode="edge"),
             helper.make_node("Pad", ["p", "pads"], ["pw"], name="PadWrap", mode="wrap"),
             helper.make_node("Tile", ["p", "reps"], ["tl"], name="Tile")]
    inits = [numpy_helper.from_array(np.array([1, 2, 0, 3], np.int64), "pads"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "reps"),
             numpy_helper.from_array(np.array([3, 5, 3], np.int64), "parts"),
             numpy_helper.from_array(np.array(2.5, np.float32), "v")]
    model = build(nodes, [("a", TP.FLOAT, ["N", 3, 70]), ("b", TP.FLOAT, ["N", 5, 70]), ("p", TP.FLOAT, [9, 17]),
                               ("pads_c", TP.INT64, [4])],
                       [("c", TP.FLOAT, None), ("s0", TP.FLOAT, None), ("s1", TP.FLOAT, None), ("s2", TP.FLOAT, None),
                        ("pc", TP.FLOAT, [None, None]), ("pr", TP.FLOAT, None), ("pe", TP.FLOAT, None),
                        ("pw", TP.FLOAT, None), ("tl", TP.FLOAT, None)], inits, opset=19)
    feeds = {"a": rand(2, 3, 70), "b": rand(2, 5, 70, seed=1), "p": rand(9, 17, seed=2),
             "pads_c": np.array([3, 0, 2, 40], np.int64)}
    check(model, feeds, {"Concat": "grid", "Split": "grid", "PadConst": "grid", "PadReflect": "grid",
                         "PadEdge": "grid", "PadWrap": "grid", "Tile": "grid"})


def test_scatters_copy_in_a_block_and_update_in_order():
    """ScatterElements with repeated indices (the last one wins) and ScatterND with add: a block
    of threads copies, one thread writes the updates in order."""
    nodes = [helper.make_node("ScatterElements", ["x", "i", "u"], ["se"], name="ScatterElements", axis=1),
             helper.make_node("ScatterND", ["x", "nd", "un"], ["sn"], name="ScatterND", reduction="add")]
    model = build(nodes, [("x", TP.FLOAT, [7, 200]), ("i", TP.INT64, [7, 3]), ("u", TP.FLOAT, [7, 3]),
                               ("nd", TP.INT64, [4, 1]), ("un", TP.FLOAT, [4, 200])],
                       [("se", TP.FLOAT, None), ("sn", TP.FLOAT, None)], opset=18)
    feeds = {"x": rand(7, 200), "i": np.array([[5, 5, -1]] * 7, np.int64), "u": rand(7, 3, seed=1),
             "nd": np.array([[2], [-1], [2], [0]], np.int64), "un": rand(4, 200, seed=2)}
    check(model, feeds, {"ScatterElements": "block", "ScatterND": "block"})


def test_prelu_one_hot_trilu_and_fill_take_a_thread_per_element():
    """PRelu with a broadcast slope, OneHot along a middle axis (indices out of range stay off),
    Triu / Tril of a batch of matrices and ConstantOfShape with a run-time shape."""
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["pr"], name="PRelu"),
             helper.make_node("OneHot", ["idx", "depth", "vals"], ["oh"], name="OneHot", axis=1),
             helper.make_node("Trilu", ["m", "k"], ["up"], name="Triu", upper=1),
             helper.make_node("Trilu", ["m"], ["lo"], name="Tril", upper=0),
             helper.make_node("ConstantOfShape", ["shape"], ["fill"], name="Fill",
                              value=helper.make_tensor("value", TP.FLOAT, [1], [1.5]))]
    inits = [numpy_helper.from_array(np.array([37], np.int64), "depth"),
             numpy_helper.from_array(np.array([-1, 4], np.float32), "vals"),
             numpy_helper.from_array(np.array(-2, np.int64), "k")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 5, 60]), ("slope", TP.FLOAT, [5, 1]), ("idx", TP.INT64, [6, 11]),
                               ("m", TP.FLOAT, [3, 17, 19]), ("shape", TP.INT64, [3])],
                       [("pr", TP.FLOAT, None), ("oh", TP.FLOAT, None), ("up", TP.FLOAT, None), ("lo", TP.FLOAT, None),
                        ("fill", TP.FLOAT, None)], inits, opset=18)
    rng = np.random.default_rng(0)
    feeds = {"x": rand(2, 5, 60), "slope": rand(5, 1, seed=1), "idx": rng.integers(-40, 40, (6, 11)),
             "m": rand(3, 17, 19, seed=2), "shape": np.array([3, 7, 50], np.int64)}
    check(model, feeds, {"PRelu": "grid", "OneHot": "grid", "Triu": "grid", "Tril": "grid", "Fill": "grid"})


def test_bitcast_copies_the_bytes_with_a_thread_per_element():
    """BitCast shares the copy family: the device copy moves bytes, not converted values."""
    model = make_model([helper.make_node("BitCast", ["x"], ["y"], name="Bits", to=TP.INT32)],
                       [("x", TP.FLOAT, ["N", 300])], [("y", TP.INT32, ["N", 300])], opset=26)
    sess = cuda_session(model)
    assert launches(sess) == {"Bits": "grid"}
    x = rand(3, 300, seed=4)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.view(np.int32))


def test_integer_division_checks_its_divisor_in_every_thread():
    """Integer Div and Mod by a divisor known only at run time: a thread per output element,
    each failing the run on a zero divisor element it reads (broadcast or not)."""
    nodes = [helper.make_node("Div", ["a", "d"], ["q"], name="DivRow"),
             helper.make_node("Mod", ["a", "m"], ["r"], name="ModSame")]
    model = build(nodes, [("a", TP.INT32, ["N", 300]), ("d", TP.INT32, [300]), ("m", TP.INT32, ["N", 300])],
                  [("q", TP.INT32, None), ("r", TP.INT32, None)], opset=18)
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, (3, 300), dtype=np.int32)
    d = rng.integers(1, 50, 300, dtype=np.int32) * rng.choice([-1, 1], 300).astype(np.int32)
    m = rng.integers(1, 30, (3, 300), dtype=np.int32)
    sess = check(model, {"a": a, "d": d, "m": m}, {"DivRow": "grid", "ModSame": "grid"})
    for bad in ({"d": np.where(np.arange(300) == 299, 0, d).astype(np.int32)},
                {"m": np.where(np.arange(900).reshape(3, 300) == 450, 0, m).astype(np.int32)}):
        with pytest.raises(onnxc.RuntimeFailure, match="division by zero|divisor|zero"):
            sess.run(None, {"a": a, "d": d, "m": m, **bad})
    assert np.array_equal(sess.run(None, {"a": a, "d": d, "m": m})[0], run_ort(model, {"a": a, "d": d, "m": m})[0])
