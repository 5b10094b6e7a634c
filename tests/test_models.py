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


@pytest.mark.parametrize("name", LIGHT_ZOO)
def test_light_zoo_matches_onnxruntime(name):
    model = with_random_weights(onnx.load(light_model_path(name)))
    sess = onnxc.InferenceSession(model.SerializeToString())
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).standard_normal(inp.shape).astype(np.float32)
    assert_close(sess.run(None, {inp.name: x}), run_ort(model, {inp.name: x}))


@pytest.mark.parametrize("opset", [17, 18])
def test_encoder_block_matches_onnxruntime_at_several_sizes(opset):
    model = encoder_block(layers=2, opset=opset)
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert sess.get_inputs()[0].shape == ["batch", "seq"]
    for batch, seq in ((2, 16), (1, 5), (3, 33)):
        feed = encoder_feed(batch, seq)
        assert_close(sess.run(None, feed), run_ort(model, feed))
