"""Data movement and indexing ops (Transpose, Slice, Gather, Scatter*, TensorScatter, Pad, ...) against onnxruntime.

Many nodes share one model (one compile) to keep the file fast.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16, TP.BFLOAT16: ml_dtypes.bfloat16,
      TP.INT8: np.int8, TP.INT16: np.int16, TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8,
      TP.UINT16: np.uint16, TP.UINT32: np.uint32, TP.UINT64: np.uint64, TP.BOOL: np.bool_}
BIG = 2**63 - 1


def _random(elem: int, shape, rng) -> np.ndarray:
    t = NP[elem]
    if elem == TP.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(t, np.integer):
        return rng.integers(0, 100, shape).astype(t)
    return rng.uniform(-10, 10, shape).astype(np.float32).astype(t)


def _ints(name: str, values, elem=TP.INT64) -> helper.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=NP[elem]), name)


def _node(op: str, inputs, outputs, **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def _outputs(elem: int, ranks: dict[str, int]):
    return [(name, elem, [None] * rank) for name, rank in ranks.items()]


# --- layout ops on every dtype -------------------------------------------------------------

def _layout_model(elem: int):
    nodes = [
        _node("Transpose", ["x"], ["transpose"], perm=[2, 0, 1]),
        _node("Transpose", ["x"], ["transpose_default"]),
        _node("Flatten", ["x"], ["flatten"], axis=2),
        _node("Flatten", ["x"], ["flatten_neg"], axis=-3),
        _node("Unsqueeze", ["x", "unsqueeze_axes"], ["unsqueeze"]),
        _node("Squeeze", ["unsqueeze", "squeeze_axes"], ["squeeze"]),
        _node("Reshape", ["x", "reshape_shape"], ["reshape"]),
        _node("Transpose", ["transpose"], ["transpose_back"], perm=[1, 2, 0]),
        _node("Concat", ["x", "x", "transpose_back"], ["concat"], axis=-1),
        _node("Split", ["x", "split"], ["split0", "split1"], axis=2),
        _node("Slice", ["x", "starts", "ends", "axes", "steps"], ["slice"]),
        _node("Expand", ["x", "expand_shape"], ["expand"]),
        _node("Tile", ["x", "repeats"], ["tile"]),
        _node("Gather", ["x", "gather_indices"], ["gather"], axis=1),
    ]
    inits = [_ints("unsqueeze_axes", [0, -1]), _ints("squeeze_axes", [0]), _ints("reshape_shape", [0, -1]),
             _ints("split", [1, 3]), _ints("starts", [-1, 0]), _ints("ends", [-BIG, 3]), _ints("axes", [0, 2]),
             _ints("steps", [-1, 2]), _ints("expand_shape", [2, 1, 3, 4]), _ints("repeats", [2, 1, 2]),
             _ints("gather_indices", [[2, -1], [0, 1]])]
    ranks = {"transpose": 3, "transpose_default": 3, "flatten": 2, "flatten_neg": 2, "unsqueeze": 5, "squeeze": 4,
             "reshape": 2, "transpose_back": 3, "concat": 3, "split0": 3, "split1": 3, "slice": 3, "expand": 4,
             "tile": 3, "gather": 4}
    return make_model(nodes, [("x", elem, [2, 3, 4])], _outputs(elem, ranks), inits, opset=21)


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT8, TP.INT64, TP.UINT16, TP.BOOL])
def test_layout_ops(elem):
    rng = np.random.default_rng(0)
    assert_matches_ort(_layout_model(elem), {"x": _random(elem, [2, 3, 4], rng)})


def test_bfloat16_layout():
    """onnxruntime lacks bfloat16 kernels for most of these: compare with numpy."""
    nodes = [_node("Transpose", ["x"], ["t"], perm=[1, 0]), _node("Concat", ["x", "x"], ["c"], axis=0),
             _node("Pad", ["x", "pads"], ["p"], mode="reflect")]
    model = make_model(nodes, [("x", TP.BFLOAT16, [2, 3])], _outputs(TP.BFLOAT16, {"t": 2, "c": 2, "p": 2}),
                       [_ints("pads", [1, 2, 0, 1])])
    x = _random(TP.FLOAT, [2, 3], np.random.default_rng(1)).astype(ml_dtypes.bfloat16)
    t, c, p = onnxc.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(c, np.concatenate([x, x]))
    np.testing.assert_array_equal(p.astype(np.float32), np.pad(x.astype(np.float32), [(1, 0), (2, 1)], "reflect"))


# --- spatial rearrangements, padding, triangles ------------------------------------------------

@pytest.mark.parametrize("elem", [TP.FLOAT, TP.INT64])
def test_pad_depth_space_trilu(elem):
    nodes = [
        _node("Pad", ["x", "pads", "value"], ["pad_constant"]),
        _node("Pad", ["x", "pads"], ["pad_reflect"], mode="reflect"),
        _node("Pad", ["x", "pads"], ["pad_edge"], mode="edge"),
        _node("Pad", ["x", "pads_wide"], ["pad_wrap"], mode="wrap"),
        _node("Pad", ["x", "pads_crop"], ["pad_crop"]),
        _node("Pad", ["x", "pads_axes", "value", "pad_axes"], ["pad_on_axes"]),
        _node("Trilu", ["x", "k_pos"], ["triu"]),
        _node("Trilu", ["x", "k_neg"], ["tril"], upper=0),
        _node("Trilu", ["x"], ["tril_default"], upper=0),
    ]
    if elem == TP.FLOAT:  # onnxruntime has these for float only
        nodes += [_node("DepthToSpace", ["x"], ["d2s_dcr"], blocksize=2),
                  _node("DepthToSpace", ["x"], ["d2s_crd"], blocksize=2, mode="CRD"),
                  _node("SpaceToDepth", ["x"], ["s2d"], blocksize=2)]
    inits = [_ints("pads", [0, 1, 2, 1, 0, 0, 1, 2]), _ints("pads_wide", [0, 0, 5, 4, 0, 0, 3, 6]),
             _ints("pads_crop", [0, -1, 1, -2, 0, 0, -1, 1]), _ints("pads_axes", [1, 3, 2, 0]),
             _ints("pad_axes", [-1, 2]), numpy_helper.from_array(np.array(7, dtype=NP[elem]), "value"),
             _ints("k_pos", 1), _ints("k_neg", -2)]
    ranks = {n.output[0]: 4 for n in nodes}
    model = make_model(nodes, [("x", elem, [1, 8, 4, 6])], _outputs(elem, ranks), inits, opset=21)
    assert_matches_ort(model, {"x": _random(elem, [1, 8, 4, 6], np.random.default_rng(2))})


# --- symbolic dims ------------------------------------------------------------------------------

def test_symbolic_batch():
    nodes = [
        _node("Transpose", ["x"], ["transpose"], perm=[1, 0, 2]),
        _node("Slice", ["x", "one", "big", "zero"], ["slice_from_1"]),
        _node("Slice", ["x", "minus_two", "big", "zero"], ["slice_last_2"]),
        _node("Slice", ["x", "zero", "minus_one", "zero", "two"], ["slice_step_2"]),
        _node("Concat", ["x", "x"], ["concat"], axis=0),
        _node("Split", ["x"], ["split0", "split1"], axis=0, num_outputs=2),
        _node("Pad", ["x", "pads"], ["pad"]),
        _node("Gather", ["x", "gather_indices"], ["gather"], axis=0),
        _node("Expand", ["x", "expand_shape"], ["expand"]),
        _node("Flatten", ["x"], ["flatten"], axis=1),
        _node("Tile", ["x", "repeats"], ["tile"]),
        _node("Reshape", ["x", "reshape_shape"], ["reshape"]),
        _node("Unsqueeze", ["x", "one"], ["unsqueeze"]),
        _node("Squeeze", ["unsqueeze", "one"], ["squeeze"]),
        _node("Trilu", ["x"], ["trilu"]),
        _node("GatherElements", ["x", "x_indices"], ["gather_elements"], axis=0),
        _node("NonZero", ["x"], ["nonzero"]),
    ]
    inits = [_ints("zero", [0]), _ints("one", [1]), _ints("two", [2]), _ints("minus_one", [-1]),
             _ints("minus_two", [-2]), _ints("big", [BIG]), _ints("pads", [1, 0, 0, 2, 0, 0]),
             _ints("gather_indices", [0, -1]), _ints("expand_shape", [2, 1, 1, 4]), _ints("repeats", [2, 1, 1]),
             _ints("reshape_shape", [-1, 4])]
    ranks = {"transpose": 3, "slice_from_1": 3, "slice_last_2": 3, "slice_step_2": 3, "concat": 3, "split0": 3,
             "split1": 3, "pad": 3, "gather": 3, "expand": 4, "flatten": 2, "tile": 3, "reshape": 2,
             "unsqueeze": 4, "squeeze": 3, "trilu": 3, "gather_elements": 3}
    outputs = _outputs(TP.FLOAT, ranks) + [("nonzero", TP.INT64, [3, None])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 3, 4]), ("x_indices", TP.INT64, ["N", 3, 4])], outputs,
                       inits, opset=21)
    sess = onnxc.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(3)
    for n in (1, 2, 5):
        x = _random(TP.FLOAT, [n, 3, 4], rng)
        x[x < 0] = 0
        feeds = {"x": x, "x_indices": rng.integers(-n, n, [n, 3, 4])}
        expected = run_ort(model, feeds)
        for name, a, e in zip([o[0] for o in outputs], sess.run(None, feeds), expected):
            assert a.shape == e.shape, name
            np.testing.assert_array_equal(a, e, err_msg=name)


# --- parameters computed at run time --------------------------------------------------------------

@pytest.mark.parametrize("batch", ["N", 2])
def test_slices_of_long_rows_split_between_threads(batch):
    """Slices whose rows are at least 16 elements copy those rows on the threads (above 64K
    elements), a row's source offset found from its number: a rectangle of each map (rows of
    24, as the splits of DeepLabV3's dilated convolutions) and every other channel (rows of a
    whole map); so do shorter rows with one axis outside them (columns 9 to 23 of every row:
    an offset without a division), not a rectangle of such rows. The same values as
    onnxruntime's at 2 threads, with a symbolic batch too."""
    x = np.random.default_rng(3).standard_normal([2, 200, 40, 40]).astype(np.float32)
    nodes = [_node("Slice", ["X", "s0", "e0", "a0"], ["A"]), _node("Slice", ["X", "s1", "e1", "a1", "st1"], ["B"]),
             _node("Slice", ["X", "s2", "e2", "a2"], ["C"]), _node("Slice", ["X", "s3", "e3", "a3"], ["D"])]
    inits = [_ints("s0", [4, 9]), _ints("e0", [28, 33]), _ints("a0", [2, 3]),
             _ints("s1", [1]), _ints("e1", [200]), _ints("a1", [1]), _ints("st1", [2]),
             _ints("s2", [9]), _ints("e2", [24]), _ints("a2", [3]),
             _ints("s3", [4, 9]), _ints("e3", [28, 24]), _ints("a3", [2, 3])]
    model = make_model(nodes, [("X", TP.FLOAT, [batch, 200, 40, 40])],
                       [(name, TP.FLOAT, [None] * 4) for name in "ABCD"], inits)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    source = open(os.path.join(sess.artifact_dir, "model.c")).read()
    # three slices' numbered rows, serial and threaded copies
    assert source.count("for (int64_t q = 0; q < ") == 6
    for a, e in zip(sess.run(None, {"X": x}), run_ort(model, {"X": x})):
        np.testing.assert_array_equal(a, e)


def test_runtime_parameters():
    """Shapes that depend on input values: one session, several parameter sets."""
    int_inputs = {"starts": 2, "ends": 2, "axes": 2, "steps": 2, "expand_shape": 4, "repeats": 3, "pads": 6,
                  "split": 2, "unsqueeze_axes": 2, "squeeze_axes": 1, "reshape_shape": 2, "depth": 1,
                  "crop_shape": 2, "pad_axes": 1, "axis_pads": 2}
    nodes = [
        _node("Slice", ["x", "starts", "ends", "axes", "steps"], ["slice"]),
        _node("Slice", ["x", "starts", "ends"], ["slice_no_axes"]),
        _node("Expand", ["x", "expand_shape"], ["expand"]),
        _node("Tile", ["x", "repeats"], ["tile"]),
        _node("Pad", ["x", "pads"], ["pad"], mode="edge"),
        _node("Pad", ["x", "axis_pads", "", "pad_axes"], ["pad_axis"]),
        _node("Split", ["x", "split"], ["split0", "split1"], axis=1),
        _node("Unsqueeze", ["x", "unsqueeze_axes"], ["unsqueeze"]),
        _node("Squeeze", ["unsqueeze", "squeeze_axes"], ["squeeze"]),
        _node("Reshape", ["x", "reshape_shape"], ["reshape"]),
        _node("OneHot", ["labels", "depth", "values"], ["one_hot"], axis=1),
        _node("CenterCropPad", ["x", "crop_shape"], ["crop"], axes=[0, 2]),
        _node("Compress", ["x", "condition"], ["compress"], axis=1),
    ]
    ranks = {"slice": 3, "slice_no_axes": 3, "expand": 4, "tile": 3, "pad": 3, "pad_axis": 3, "split0": 3,
             "split1": 3, "unsqueeze": 5, "squeeze": 4, "reshape": 2, "one_hot": 2, "crop": 3, "compress": 3}
    inputs = [("x", TP.FLOAT, [3, 4, 5]), ("labels", TP.INT64, [4]), ("values", TP.FLOAT, [2]),
              ("condition", TP.BOOL, [4])] + [(name, TP.INT64, [n]) for name, n in int_inputs.items()]
    model = make_model(nodes, inputs, _outputs(TP.FLOAT, ranks), opset=21)
    sess = onnxc.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(4)
    params = [
        dict(starts=[1, -1], ends=[3, -BIG], axes=[0, 2], steps=[1, -2], expand_shape=[2, 3, 1, 5], repeats=[1, 2, 3],
             pads=[0, 1, 2, 1, 0, 3], split=[1, 3], unsqueeze_axes=[0, -1], squeeze_axes=[4], reshape_shape=[-1, 10],
             depth=[5], crop_shape=[2, 7], pad_axes=[-2], axis_pads=[1, 2], condition=[True, False, True, True]),
        dict(starts=[0, 10], ends=[BIG, -10], axes=[-1, 1], steps=[2, -1], expand_shape=[1, 1, 4, 1], repeats=[0, 1, 1],
             pads=[1, 0, -1, 0, 2, -2], split=[4, 0], unsqueeze_axes=[1, 3], squeeze_axes=[1], reshape_shape=[0, -1],
             depth=[3], crop_shape=[5, 5], pad_axes=[0], axis_pads=[0, -1], condition=[False, False, False, False]),
    ]
    for p in params:
        feeds = {name: np.array(p[name], dtype=np.int64) for name in int_inputs}
        feeds.update(x=_random(TP.FLOAT, [3, 4, 5], rng), labels=np.array([0, -1, 4, 2], dtype=np.int64),
                     values=np.array([-1, 1], dtype=np.float32), condition=np.array(p["condition"]))
        expected = run_ort(model, feeds)
        for name, a, e in zip(ranks, sess.run(None, feeds), expected):
            assert a.shape == e.shape, name
            np.testing.assert_array_equal(a, e, err_msg=name)


# --- gathers and scatters -------------------------------------------------------------------------

@pytest.mark.parametrize("elem,index", [(TP.FLOAT, TP.INT64), (TP.INT32, TP.INT32), (TP.FLOAT16, TP.INT64),
                                        (TP.BOOL, TP.INT32)])
def test_gathers(elem, index):
    nodes = [
        _node("Gather", ["data", "idx"], ["gather0"], axis=0),
        _node("Gather", ["data", "idx"], ["gather_last"], axis=-1),
        _node("Gather", ["data", "scalar_idx"], ["gather_scalar"], axis=1),
        _node("GatherElements", ["data", "elem_idx"], ["gather_elements"], axis=1),
        _node("GatherND", ["data", "nd_idx"], ["gather_nd"]),
        _node("GatherND", ["data", "nd_batch_idx"], ["gather_nd_batch"], batch_dims=1),
    ]
    inits = [_ints("idx", [[1, -1], [0, 2]], index), _ints("scalar_idx", -2, index),
             _ints("elem_idx", [[[0, -1, 2, 1]], [[2, 2, -3, 0]], [[1, 1, 1, 1]]], index),
             _ints("nd_idx", [[0, 1], [-1, 2]]), _ints("nd_batch_idx", [[1, 0], [2, 3], [0, -1]])]
    ranks = {"gather0": 4, "gather_last": 4, "gather_scalar": 2, "gather_elements": 3, "gather_nd": 2,
             "gather_nd_batch": 1}
    model = make_model(nodes, [("data", elem, [3, 3, 4])], _outputs(elem, ranks), inits, opset=21)
    assert_matches_ort(model, {"data": _random(elem, [3, 3, 4], np.random.default_rng(5))})


ALL_REDUCTIONS = ("none", "add", "mul", "max", "min")


@pytest.mark.parametrize("elem", [TP.FLOAT, TP.INT64, TP.FLOAT16])
def test_scatters(elem):
    nodes = [_node("ScatterElements", ["data", "idx", "updates"], [f"elements_{r}"], axis=1, reduction=r)
             for r in ALL_REDUCTIONS]
    nodes += [_node("ScatterND", ["data", "nd_idx", "nd_updates"], [f"nd_{r}"], reduction=r) for r in ALL_REDUCTIONS]
    inits = [_ints("idx", [[1, -1], [0, 0], [3, 2]]), _ints("nd_idx", [[1], [-1], [1]])]
    ranks = {n.output[0]: 2 for n in nodes}
    inputs = [("data", elem, [3, 4]), ("updates", elem, [3, 2]), ("nd_updates", elem, [3, 4])]
    model = make_model(nodes, inputs, _outputs(elem, ranks), inits, opset=18)
    rng = np.random.default_rng(6)
    feeds = {"data": _random(elem, [3, 4], rng), "updates": _random(elem, [3, 2], rng) % 8,
             "nd_updates": _random(elem, [3, 4], rng) % 8}
    if elem != TP.FLOAT16:
        assert_matches_ort(model, feeds, rtol=1e-3, atol=1e-3)
        return
    # onnxruntime has no float16 scatter reductions: the ONNX reference implementation does.
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    for node, a, e in zip(nodes, actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, node.output[0]
        np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=1e-3, err_msg=node.output[0])


@pytest.mark.parametrize("op,feeds,rank", [
    ("Gather", {"data": np.zeros([3, 2], np.float32), "indices": np.array([0, 3])}, 2),
    ("Gather", {"data": np.zeros([3, 2], np.float32), "indices": np.array([-4, 0])}, 2),
    ("GatherElements", {"data": np.zeros([3, 2], np.float32), "indices": np.array([[0, 5]])}, 2),
    ("GatherND", {"data": np.zeros([3, 2], np.float32), "indices": np.array([[0, 2]])}, 1),
    ("ScatterElements", {"data": np.zeros([3, 2], np.float32), "indices": np.array([[0, -4]]),
                         "updates": np.ones([1, 2], np.float32)}, 2),
    ("ScatterND", {"data": np.zeros([3, 2], np.float32), "indices": np.array([[3]]),
                   "updates": np.ones([1, 2], np.float32)}, 2),
])
def test_index_out_of_range_fails(op, feeds, rank):
    inputs = [(name, TP.INT64 if name == "indices" else TP.FLOAT, list(v.shape)) for name, v in feeds.items()]
    model = make_model([_node(op, list(feeds), ["y"])], inputs, [("y", TP.FLOAT, [None] * rank)])
    with pytest.raises(onnxc.RuntimeFailure, match="index out of range"):
        onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


# --- the rest -------------------------------------------------------------------------------------

def test_misc_ops():
    nodes = [
        _node("OneHot", ["labels", "depth", "values"], ["one_hot"]),
        _node("OneHot", ["labels", "depth", "values"], ["one_hot_axis0"], axis=0),
        _node("OneHot", ["float_labels", "float_depth", "values"], ["one_hot_float"], axis=-2),
        _node("ReverseSequence", ["x", "lens_time"], ["reverse_time"], batch_axis=1, time_axis=0),
        _node("ReverseSequence", ["x", "lens_batch"], ["reverse_batch"], batch_axis=0, time_axis=1),
        _node("Compress", ["x", "condition"], ["compress_axis"], axis=-1),
        _node("Compress", ["x", "condition"], ["compress_flat"]),
        _node("NonZero", ["labels"], ["nonzero"]),
        _node("CenterCropPad", ["x", "crop_shape"], ["crop_pad"]),
        _node("CenterCropPad", ["x", "crop_axes_shape"], ["crop_axes"], axes=[-1]),
    ]
    inits = [_ints("depth", [6]), numpy_helper.from_array(np.array([0.5, 2.0], np.float32), "values"),
             numpy_helper.from_array(np.array(6.0, np.float32), "float_depth"),
             _ints("lens_time", [4, 0, 1]), _ints("lens_batch", [2, 3, 3, 1]), _ints("crop_shape", [2, 4, 6]),
             _ints("crop_axes_shape", [1])]
    ranks = {"one_hot": 3, "one_hot_axis0": 3, "one_hot_float": 3, "reverse_time": 3, "reverse_batch": 3,
             "compress_axis": 3, "compress_flat": 1, "nonzero": 2, "crop_pad": 3, "crop_axes": 3}
    outputs = [(name, TP.INT64 if name == "nonzero" else TP.FLOAT, [None] * rank) for name, rank in ranks.items()]
    inputs = [("x", TP.FLOAT, [4, 3, 2]), ("labels", TP.INT64, [2, 3]), ("float_labels", TP.FLOAT, [2, 3]),
              ("condition", TP.BOOL, [2])]
    model = make_model(nodes, inputs, outputs, inits, opset=21)
    rng = np.random.default_rng(7)
    feeds = {"x": _random(TP.FLOAT, [4, 3, 2], rng), "labels": np.array([[0, 5, -1], [7, -6, 0]]),
             "float_labels": np.array([[0.5, 5.9, -1.2], [7.0, -6.0, np.nan]], np.float32),
             "condition": np.array([False, True])}
    assert_matches_ort(model, feeds)


def test_old_opsets():
    """Attribute forms: Slice-1, Pad-2, Split-2, Squeeze/Unsqueeze-1, Scatter-9, DepthToSpace-1."""
    nodes = [
        _node("Slice", ["x"], ["slice"], starts=[1, -3], ends=[BIG, -1], axes=[0, 2]),
        _node("Pad", ["x"], ["pad"], pads=[0, 1, 2, 1, 0, 0], mode="edge"),
        _node("Pad", ["x"], ["pad_value"], pads=[1, 0, 0, 0, 0, 1], value=1.5),
        _node("Split", ["x"], ["split0", "split1"], axis=2, split=[3, 1]),
        _node("Split", ["x"], ["half0", "half1"], axis=-1),
        _node("Unsqueeze", ["x"], ["unsqueeze"], axes=[0, 3]),
        _node("Squeeze", ["unsqueeze"], ["squeeze"], axes=[0]),
        _node("Squeeze", ["unsqueeze"], ["squeeze_all"]),
        _node("Scatter", ["x", "idx", "updates"], ["scatter"], axis=1),
        _node("Reshape", ["x", "shape"], ["reshape"]),
    ]
    inits = [_ints("idx", [[[0, 1, 1, 0]], [[2, 2, 2, 2]]]), _ints("shape", [4, -1])]
    ranks = {"slice": 3, "pad": 3, "pad_value": 3, "split0": 3, "split1": 3, "half0": 3, "half1": 3,
             "unsqueeze": 5, "squeeze": 4, "squeeze_all": 3, "scatter": 3, "reshape": 2}
    inputs = [("x", TP.FLOAT, [2, 3, 4]), ("updates", TP.FLOAT, [2, 1, 4])]
    model = make_model(nodes, inputs, _outputs(TP.FLOAT, ranks), inits, opset=9)
    rng = np.random.default_rng(8)
    assert_matches_ort(model, {"x": _random(TP.FLOAT, [2, 3, 4], rng), "updates": _random(TP.FLOAT, [2, 1, 4], rng)})


def test_empty_tensors():
    nodes = [
        _node("Concat", ["x", "empty"], ["concat"], axis=1),
        _node("Slice", ["x", "starts", "ends"], ["slice"]),
        _node("Gather", ["x", "no_indices"], ["gather"], axis=1),
        _node("Transpose", ["empty"], ["transpose"]),
        _node("Pad", ["empty", "pads"], ["pad"]),
        _node("Tile", ["empty", "repeats"], ["tile"]),
        _node("Expand", ["empty", "shape"], ["expand"]),
    ]
    inits = [_ints("starts", [0, 2]), _ints("ends", [2, 1]), _ints("no_indices", np.zeros([0, 2], np.int64)),
             _ints("pads", [1, 0, 1, 2]), _ints("repeats", [2, 3]), _ints("shape", [2, 1, 1])]
    ranks = {"concat": 2, "slice": 2, "gather": 3, "transpose": 2, "pad": 2, "tile": 2, "expand": 3}
    inputs = [("x", TP.FLOAT, [2, 3]), ("empty", TP.FLOAT, [2, 0])]
    model = make_model(nodes, inputs, _outputs(TP.FLOAT, ranks), inits, opset=21)
    rng = np.random.default_rng(9)
    assert_matches_ort(model, {"x": _random(TP.FLOAT, [2, 3], rng), "empty": np.zeros([2, 0], np.float32)})


def test_symbolic_equal_split_checks_divisibility():
    model = make_model([_node("Split", ["x"], ["a", "b"])], [("x", TP.FLOAT, ["N"])],
                       [("a", TP.FLOAT, [None]), ("b", TP.FLOAT, [None])], opset=13)
    sess = onnxc.InferenceSession(model.SerializeToString())
    a, b = sess.run(None, {"x": np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(np.concatenate([a, b]), np.arange(4))
    with pytest.raises(onnxc.RuntimeFailure, match="do not add up"):
        sess.run(None, {"x": np.arange(5, dtype=np.float32)})


def test_reshape_shape_attribute():
    """Reshape-1 (opset < 5) takes the shape as an attribute; onnxruntime no longer loads such models."""
    model = make_model([_node("Reshape", ["x"], ["y"], shape=[0, -1])], [("x", TP.FLOAT, ["N", 3, 4])],
                       [("y", TP.FLOAT, [None, None])], opset=4)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in (1, 3):
        x = np.arange(n * 12, dtype=np.float32).reshape(n, 3, 4)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(n, 12))


def test_pad_nothing():
    """Zero pads: a plain copy (no index maps, no pad value)."""
    nodes = [_node("Pad", ["x", "pads", "value"], ["constant"]), _node("Pad", ["x", "pads"], ["edge"], mode="edge")]
    inits = [_ints("pads", [0, 0, 0, 0]), numpy_helper.from_array(np.array(2.0, np.float32), "value")]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 3])], _outputs(TP.FLOAT, {"constant": 2, "edge": 2}), inits)
    assert_matches_ort(model, {"x": _random(TP.FLOAT, [2, 3], np.random.default_rng(10))})


# --- TensorScatter -------------------------------------------------------------

def tensor_scatter(past_shape, update_shape, elem=TP.FLOAT, indices=True, **attrs):
    names = ["past_cache", "update"] + (["write_indices"] if indices else [])
    ins = [("past_cache", elem, past_shape), ("update", elem, update_shape)]
    if indices:
        ins.append(("write_indices", TP.INT64, [past_shape[0]]))
    return make_model([helper.make_node("TensorScatter", names, ["present_cache"], **attrs)], ins,
                      [("present_cache", elem, [None] * len(past_shape))], opset=24)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis,past,update", [(-2, (2, 3, 6, 4), (2, 3, 2, 4)), (1, (2, 5, 3), (2, 3, 3)),
                                              (-1, (3, 2, 4), (3, 2, 1))])
def test_tensor_scatter(mode, axis, past, update):
    rng = np.random.default_rng(len(past))
    m = tensor_scatter(list(past), list(update), mode=mode, axis=axis)
    top = past[axis] - update[axis]
    # circular indices wrap past the end; onnxruntime rejects negative ones, so none are drawn here
    indices = rng.integers(0, top + 3 if mode == "circular" else top + 1, past[0])
    assert_matches_ort(m, {"past_cache": _random(TP.FLOAT, past, rng), "update": _random(TP.FLOAT, update, rng),
                           "write_indices": indices})


@pytest.mark.parametrize("elem", [TP.INT32, TP.UINT8, TP.FLOAT16])
def test_tensor_scatter_dtypes_no_indices(elem):
    rng = np.random.default_rng(0)
    m = tensor_scatter([2, 4, 3], [2, 2, 3], elem=elem, indices=False)
    assert_matches_ort(m, {"past_cache": _random(elem, (2, 4, 3), rng), "update": _random(elem, (2, 2, 3), rng)})


def test_tensor_scatter_symbolic_and_range_check():
    rng = np.random.default_rng(0)
    m = tensor_scatter(["B", 8, 2], ["B", "S", 2])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for b, s in ((1, 3), (3, 1)):
        feeds = {"past_cache": _random(TP.FLOAT, (b, 8, 2), rng), "update": _random(TP.FLOAT, (b, s, 2), rng),
                 "write_indices": rng.integers(0, 8 - s, b)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(m, feeds)[0])
    feeds = {"past_cache": _random(TP.FLOAT, (1, 8, 2), rng), "update": _random(TP.FLOAT, (1, 3, 2), rng),
             "write_indices": np.array([6])}
    with pytest.raises(Exception, match="write index"):
        sess.run(None, feeds)


@pytest.mark.parametrize("axis, data_shape, indices_shape", [
    (1, [1, 1], [1, 128]),     # BERT's token type ids: an expanded constant gathered over 128 positions
    (0, [40, 3], [64, 2]),     # more than 32 positions on the axis, indices shorter on the other one
    (-1, [2, 5, 50], [2, 4, 50]),
])
def test_gather_elements_of_constants_folds_past_32_positions(axis, data_shape, indices_shape):
    """Constant GatherElements is folded at compile time: onnx's reference evaluator (np.choose,
    at most 32 choices) fails beyond 32 positions on the axis, onnxc's own folding does not."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal(data_shape).astype(np.float32)
    axis_len = (indices_shape[axis] if data_shape[axis] == 1 else data_shape[axis])
    full = list(data_shape)
    full[axis] = axis_len
    indices = rng.integers(-axis_len, axis_len, indices_shape).astype(np.int64)
    shape = np.array(full, np.int64)
    model = make_model(
        [_node("Expand", ["data", "shape"], ["expanded"]),
         _node("GatherElements", ["expanded", "indices"], ["gathered"], axis=axis),
         _node("Add", ["gathered", "x"], ["y"])],
        [("x", TP.FLOAT, indices_shape)], [("y", TP.FLOAT, indices_shape)],
        initializers=[numpy_helper.from_array(data, "data"), numpy_helper.from_array(shape, "shape"),
                      numpy_helper.from_array(indices, "indices")], opset=17)
    feed = {"x": rng.standard_normal(indices_shape).astype(np.float32)}
    expected = np.take_along_axis(np.broadcast_to(data, full)[tuple(
        slice(None) if a == axis % len(full) else slice(0, d) for a, d in enumerate(indices_shape))],
        np.where(indices < 0, indices + axis_len, indices), axis=axis) + feed["x"]
    np.testing.assert_array_equal(onnxc.InferenceSession(model.SerializeToString()).run(None, feed)[0], expected)
    np.testing.assert_array_equal(run_ort(model, feed)[0], expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_reshape_of_a_tensor_others_read_copies_it_one_part_per_thread(threads):
    """A Reshape whose input another node also reads cannot be planned over it and copies it:
    with threads, one contiguous part each (a copy over the threshold; 102400 floats here)."""
    x = np.random.default_rng(6).standard_normal([1, 64, 40, 40]).astype(np.float32)
    shape = numpy_helper.from_array(np.array([1, 4, 16, 1600], np.int64), "shape")
    model = make_model([_node("Relu", ["x"], ["r"]), _node("Reshape", ["r", "shape"], ["y"]), _node("Neg", ["r"], ["z"])],
                       [("x", TP.FLOAT, list(x.shape))], [("y", TP.FLOAT, [1, 4, 16, 1600]), ("z", TP.FLOAT, list(x.shape))],
                       initializers=[shape])
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
    session = onnxc.InferenceSession(model.SerializeToString(), so)
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        assert ("one contiguous part per thread" in f.read()) == (threads > 1)
    for _ in range(2):
        y, z = session.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(1, 4, 16, 1600))
        np.testing.assert_array_equal(z, -np.maximum(x, 0))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, perm, tiles", [
    ([1, 224, 224, 3], [0, 3, 1, 2], True),    # NHWC to NCHW: 50176 x 3 matrices transposed
    ([2, 40, 36, 5], [0, 3, 1, 2], True),      # a batch of them
    ([300, 257], [1, 0], True),                # tiles of 32 columns x 128 rows, partial at both edges
    ([4, 33, 65], [0, 2, 1], True),
    ([1, 36, 16, 196], [0, 1, 3, 2], True),    # a blocked layout's reorder: 36 matrices of one tile row each
    ([1, 3, 64, 64], [0, 2, 3, 1], False),     # 3 source rows: walked in the destination's order
    ([2, 3, 4, 5], [0, 2, 1, 3], False),       # rows of 5: copied row by row
])
def test_a_transpose_of_matrices_goes_by_tiles(shape, perm, tiles, threads):
    """A Transpose that is a (batch of) 2-D transposition(s) copies tiles that stay in the
    first-level cache (NHWC to NCHW read each line of a 3-channel image three times), on the
    threads above the copy threshold; the same values as numpy's, also for other dtypes."""
    rng = np.random.default_rng(5)
    for elem, dtype in ((TP.FLOAT, np.float32), (TP.INT64, np.int64), (TP.FLOAT16, np.float16)):
        x = rng.standard_normal(shape).astype(dtype) if dtype != np.int64 else rng.integers(-9, 9, shape)
        model = make_model([_node("Transpose", ["x"], ["y"], perm=perm)], [("x", elem, shape)],
                           [("y", elem, [shape[p] for p in perm])])
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
        session = onnxc.InferenceSession(model.SerializeToString(), so)
        with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
            assert ("transposed, in tiles of" in f.read()) == tiles
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.transpose(x, perm))
