"""NonMaxSuppression and Unique against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

rng = np.random.default_rng(0)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def random_boxes(batches, n, center):
    corners = rng.uniform(0, 10, size=(batches, n, 2)).astype(np.float32)
    sizes = rng.uniform(0.5, 4, size=(batches, n, 2)).astype(np.float32)
    if center:
        return np.concatenate([corners, sizes], -1)
    return np.concatenate([corners, corners + sizes], -1)[..., [0, 1, 2, 3]]


def nms_model(batches, classes, n, inputs=("max", "iou", "score"), opset=11, **attrs):
    names = ["boxes", "scores"] + [name if name in inputs else "" for name in ("max", "iou", "score")]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["selected"], **attrs)
    graph_inputs = [("boxes", F, [batches, n, 4]), ("scores", F, [batches, classes, n])]
    graph_inputs += [(name, I64 if name == "max" else F, [1]) for name in ("max", "iou", "score") if name in inputs]
    return make_model([node], graph_inputs, [("selected", I64, [None, 3])], opset=opset)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("max_out,iou,score", [(3, 0.5, 0.2), (100, 0.3, 0.0), (0, 0.5, 0.1), (5, 0.0, 0.9)])
def test_nms(center, opset, max_out, iou, score):
    m = nms_model(2, 3, 20, opset=opset, center_point_box=center)
    feeds = {"boxes": random_boxes(2, 20, center), "scores": rng.uniform(size=(2, 3, 20)).astype(np.float32),
             "max": np.array([max_out], np.int64), "iou": np.array([iou], np.float32),
             "score": np.array([score], np.float32)}
    assert_matches_ort(m, feeds)


@pytest.mark.parametrize("inputs", [(), ("max",), ("max", "iou")])
def test_nms_optional_inputs(inputs):
    m = nms_model(1, 2, 12, inputs=inputs)
    feeds = {"boxes": random_boxes(1, 12, 0), "scores": rng.uniform(size=(1, 2, 12)).astype(np.float32)}
    feeds.update({"max": np.array([4], np.int64), "iou": np.array([0.4], np.float32)})
    assert_matches_ort(m, {k: v for k, v in feeds.items() if k in ("boxes", "scores") + tuple(inputs)})


def test_nms_symbolic_boxes_and_ties():
    m = nms_model(1, 1, "N")
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (5, 40):
        scores = rng.integers(0, 4, size=(1, 1, n)).astype(np.float32)  # many equal scores
        feeds = {"boxes": random_boxes(1, n, 0), "scores": scores, "max": np.array([10], np.int64),
                 "iou": np.array([0.3], np.float32), "score": np.array([0.5], np.float32)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(m, feeds)[0])


def unique_model(shape, elem, **attrs):
    node = helper.make_node("Unique", ["X"], ["Y", "indices", "inverse", "counts"], **attrs)
    rank = len(shape) if "axis" in attrs else 1
    return make_model([node], [("X", elem, shape)],
                      [("Y", elem, [None] * rank), ("indices", I64, [None]), ("inverse", I64, [None]),
                       ("counts", I64, [None])], opset=11)


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("elem,np_type", [(F, np.float32), (TensorProto.INT64, np.int64),
                                          (TensorProto.INT8, np.int8), (TensorProto.DOUBLE, np.float64)])
def test_unique_flat(sorted_, elem, np_type):
    x = rng.integers(-4, 5, size=(3, 7)).astype(np_type)
    assert_matches_ort(unique_model([3, 7], elem, sorted=sorted_), {"X": x})


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_axis(axis, sorted_):
    x = rng.integers(0, 2, size=(4, 3, 6)).astype(np.float32)
    x[2] = x[0]
    x[:, :, 4] = x[:, :, 1]
    assert_matches_ort(unique_model([4, 3, 6], F, axis=axis, sorted=sorted_), {"X": x})


def test_unique_symbolic_and_only_y():
    m = unique_model(["N"], TensorProto.INT64)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n in (1, 30):
        x = rng.integers(0, 6, size=n).astype(np.int64)
        for a, e in zip(sess.run(None, {"X": x}), run_ort(m, {"X": x})):
            np.testing.assert_array_equal(a, e)
    node = helper.make_node("Unique", ["X"], ["Y"])
    m = make_model([node], [("X", F, [8])], [("Y", F, [None])], opset=11)
    assert_matches_ort(m, {"X": rng.integers(0, 3, size=8).astype(np.float32)})


def test_unique_const_input_is_static():
    node = helper.make_node("Unique", ["X"], ["Y", "indices", "inverse", "counts"], sorted=0)
    x = numpy_helper.from_array(np.array([3, 1, 3, 2], np.int64), "X")
    m = make_model([node], [], [("Y", I64, [3]), ("indices", I64, [3]), ("inverse", I64, [4]), ("counts", I64, [3])],
                   [x], opset=11)
    assert_matches_ort(m, {})
