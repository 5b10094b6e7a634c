"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
rng = np.random.default_rng(0)


def loss_model(op, x_shape, *, weight=False, log_prob=False, elem=F, label_elem=I64, opset=13, **attrs):
    label_shape = [x_shape[0]] + list(x_shape[2:])
    inputs = [("X", elem, x_shape), ("T", label_elem, label_shape)]
    if weight:
        inputs.append(("W", elem, [x_shape[1]]))
    outputs = [("L", elem, label_shape if attrs.get("reduction") == "none" else [])]
    if log_prob:
        outputs.append(("LP", elem, x_shape))
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], **attrs)
    return make_model([node], inputs, outputs, opset=opset)


def loss_feeds(x_shape, classes, weight=False, ignore=None, dtype=np.float32, label_dtype=np.int64):
    x = rng.standard_normal(x_shape).astype(dtype)
    t = rng.integers(0, classes, size=[x_shape[0]] + list(x_shape[2:])).astype(label_dtype)
    if ignore is not None:
        t.flat[::3] = ignore
    feeds = {"X": x, "T": t}
    if weight:
        feeds["W"] = rng.random(classes).astype(dtype)
    return feeds


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("ignore", [None, 1, -5])
def test_losses(op, reduction, weight, ignore):
    shape = [3, 4, 2, 3]
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    m = loss_model(op, shape, weight=weight, **attrs)
    assert_matches_ort(m, loss_feeds(shape, 4, weight, ignore))


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_sce_log_prob_2d_int32(reduction):
    m = loss_model("SoftmaxCrossEntropyLoss", [5, 6], log_prob=True, label_elem=I32, reduction=reduction)
    assert_matches_ort(m, loss_feeds([5, 6], 6, label_dtype=np.int32))


def test_double():
    m = loss_model("SoftmaxCrossEntropyLoss", [4, 3, 5], weight=True, elem=TensorProto.DOUBLE, log_prob=True)
    feeds = loss_feeds([4, 3, 5], 3, weight=True, dtype=np.float64)
    expected = ReferenceEvaluator(m).run(None, feeds)
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-12)


def test_float16_nll():
    m = loss_model("NegativeLogLikelihoodLoss", [4, 3, 5], weight=True, elem=TensorProto.FLOAT16, reduction="sum")
    feeds = loss_feeds([4, 3, 5], 3, weight=True, dtype=np.float16)
    expected = ReferenceEvaluator(m).run(None, feeds)[0]
    actual = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    assert actual.dtype == np.float16 and actual.shape == ()
    np.testing.assert_allclose(actual.astype(np.float32), np.float32(expected), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_symbolic_batch(op):
    m = loss_model(op, ["N", 4, "H"], reduction="none", ignore_index=2)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for n, h in ((2, 3), (5, 1)):
        feeds = loss_feeds([n, 4, h], 4, ignore=2)
        expected = ReferenceEvaluator(m).run(None, feeds)[0]
        np.testing.assert_allclose(sess.run(None, feeds)[0], expected, rtol=1e-5, atol=1e-6)


def test_target_out_of_range_fails():
    m = loss_model("NegativeLogLikelihoodLoss", [2, 3], reduction="sum")
    sess = onnxc.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="target out of range"):
        sess.run(None, {"X": np.zeros((2, 3), np.float32), "T": np.array([0, 3], np.int64)})
