"""Models written for old opsets (7-12) compile and match onnxruntime like current ones.

One small CNN-with-a-head is spelled the way each opset requires: attributes that later
became inputs (Slice starts/ends, Split sizes, Pad pads, Clip bounds, Squeeze/Unsqueeze and
ReduceMean axes), Upsample before Resize existed, Softmax's flattening axis before 13.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import assert_matches_ort, make_model

rng = np.random.default_rng(11)
F = TP.FLOAT


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def old_cnn(opset: int):
    nodes, inits = [], []
    inits += [const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
              const("b", rng.standard_normal(4).astype(np.float32)),
              const("gamma", rng.random(4).astype(np.float32) + 0.5), const("beta", rng.random(4).astype(np.float32)),
              const("mean", rng.random(4).astype(np.float32)), const("var", rng.random(4).astype(np.float32) + 0.5),
              const("fc", rng.standard_normal((6, 5)).astype(np.float32)), const("fcb", rng.random(5).astype(np.float32))]
    nodes.append(helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]))
    bn = {"spatial": 1} if opset < 9 else {}
    nodes.append(helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], **bn))
    if opset < 11:  # Clip bounds as attributes
        nodes.append(helper.make_node("Clip", ["bn"], ["r"], min=0.0, max=6.0))
    else:
        inits += [const("lo", np.float32(0)), const("hi", np.float32(6))]
        nodes.append(helper.make_node("Clip", ["bn", "lo", "hi"], ["r"]))
    if opset < 11:  # Pad v2: pads and value attributes
        nodes.append(helper.make_node("Pad", ["r"], ["p"], pads=[0, 0, 1, 0, 0, 0, 0, 1], mode="constant", value=0.5))
    else:
        inits += [const("pads", np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64)), const("pv", np.float32(0.5))]
        nodes.append(helper.make_node("Pad", ["r", "pads", "pv"], ["p"], mode="constant"))
    nodes.append(helper.make_node("MaxPool", ["p"], ["m"], kernel_shape=[2, 2], strides=[2, 2]))
    if opset < 10:  # Upsample (deprecated at 10): scales as attribute at 7-8, as input at 9
        if opset < 9:
            nodes.append(helper.make_node("Upsample", ["m"], ["u"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0]))
        else:
            inits.append(const("scales", np.array([1, 1, 2, 2], np.float32)))
            nodes.append(helper.make_node("Upsample", ["m", "scales"], ["u"], mode="nearest"))
    else:
        inits += [const("roi", np.zeros(0, np.float32)), const("scales", np.array([1, 1, 2, 2], np.float32))]
        inputs = ["m", "", "scales"] if opset >= 13 else ["m", "roi", "scales"] if opset >= 11 else ["m", "scales"]
        nodes.append(helper.make_node("Resize", inputs, ["u"], mode="nearest"))
    if opset < 10:  # Slice with attributes
        nodes.append(helper.make_node("Slice", ["u"], ["s"], starts=[0, 1], ends=[4, 3], axes=[1, 2]))
    else:
        inits += [const("st", np.array([0, 1], np.int64)), const("en", np.array([4, 3], np.int64)),
                  const("ax", np.array([1, 2], np.int64))]
        nodes.append(helper.make_node("Slice", ["u", "st", "en", "ax"], ["s"]))
    if opset < 13:  # Split sizes as an attribute
        nodes.append(helper.make_node("Split", ["s"], ["s1", "s2"], axis=1, split=[1, 3]))
    else:
        inits.append(const("sp", np.array([1, 3], np.int64)))
        nodes.append(helper.make_node("Split", ["s", "sp"], ["s1", "s2"], axis=1))
    nodes.append(helper.make_node("Add", ["s1", "s2"], ["sum"]))  # broadcasts (N,1,2,8) to (N,3,2,8)
    inits.append(const("a3", np.array([3], np.int64)))
    if opset < 18:  # axes attribute until ReduceMean-18
        nodes.append(helper.make_node("ReduceMean", ["sum"], ["gap"], axes=[3], keepdims=1))
    else:
        nodes.append(helper.make_node("ReduceMean", ["sum", "a3"], ["gap"], keepdims=1))
    if opset < 13:  # axes attribute until Squeeze-13
        nodes.append(helper.make_node("Squeeze", ["gap"], ["sq"], axes=[3]))
    else:
        nodes.append(helper.make_node("Squeeze", ["gap", "a3"], ["sq"]))
    nodes.append(helper.make_node("Reshape", ["sq", "flat"], ["f"]))
    inits.append(const("flat", np.array([0, -1], np.int64)))
    nodes.append(helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"]))
    if opset < 13:  # Softmax flattens from axis (old semantics); axis 1 of a 2-D tensor
        nodes.append(helper.make_node("Softmax", ["logits"], ["y"], axis=1))
    else:
        nodes.append(helper.make_node("Softmax", ["logits"], ["y"], axis=-1))
    if opset < 12:
        nodes.append(helper.make_node("Dropout", ["y"], ["z"], **({"is_test": 1} if opset < 7 else {})))
    else:
        nodes.append(helper.make_node("Identity", ["y"], ["z"]))
    return make_model(nodes, [("x", F, ["N", 3, 8, 8])], [("z", F, ["N", 5])], inits, opset=opset)


@pytest.mark.parametrize("opset", [7, 8, 9, 10, 11, 12, 13, 21])
def test_old_cnn(opset):
    """Batches of 1 and 3 through the one build of the model (its batch is symbolic)."""
    model = old_cnn(opset)
    for batch in (1, 3):
        assert_matches_ort(model, {"x": rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("opset", [7, 9, 11, 12])
def test_old_softmax_flattens_from_axis(opset):
    """Before opset 13, Softmax normalises over all dims from ``axis`` on, not one axis."""
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])],
                   opset=opset)
    assert_matches_ort(m, {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)})
