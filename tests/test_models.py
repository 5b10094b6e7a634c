"""Whole models against onnxruntime: the light CNN zoo with random weights, and a transformer encoder."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import onnxc
from helpers import run_ort
from models import LIGHT_ZOO, encoder_block, encoder_feed, light_model_path, with_random_weights


def assert_close(actual, expected, rtol=1e-4):
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        scale = float(np.max(np.abs(e))) if e.size else 1.0
        np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * scale)


def with_logits_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """The final Softmax's input as a second output: random weights saturate the softmax (one
    value near 1), where the logits still show every difference."""
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    if not softmax:
        return model
    softmax = softmax[-1]
    shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    model.graph.output.append(onnx.helper.make_tensor_value_info(softmax.input[0], onnx.TensorProto.FLOAT, shape))
    return model


@pytest.mark.parametrize("name", LIGHT_ZOO)
def test_light_zoo_matches_onnxruntime(name):
    model = with_logits_output(with_random_weights(onnx.load(light_model_path(name))))
    sess = onnxc.InferenceSession(model.SerializeToString())
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).standard_normal(inp.shape).astype(np.float32)
    got, want = sess.run(None, {inp.name: x}), run_ort(model, {inp.name: x})
    assert_close(got[1:], want[1:])
    top = np.sort(want[-1].reshape(-1))[-2:]
    if len(got) == 1 or top[1] - top[0] > 1e-3 * np.abs(want[-1]).max():
        assert_close(got[:1], want[:1])  # the probabilities too, unless the top two logits tie


@pytest.mark.parametrize("opset", [17, 18])
def test_encoder_block_matches_onnxruntime_at_several_sizes(opset):
    model = encoder_block(layers=2, opset=opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert sess.get_inputs()[0].shape == ["batch", "seq"]
    for batch, seq in ((2, 16), (1, 5), (3, 33)):
        feed = encoder_feed(batch, seq)
        assert_close(sess.run(None, feed), run_ort(model, feed))
