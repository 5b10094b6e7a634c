"""onnxruntime's com.microsoft transformer and misc contrib ops against onnxruntime (or, for the
ops onnxruntime computes only on GPUs, against numpy) on random inputs."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from tests.helpers import assert_matches_ort, make_model, run_onnxc

MS = "com.microsoft"
F = T.FLOAT


def ms_model(op, inputs, outputs, initializers=(), domain=MS, **attrs):
    """One ``op`` node; ``inputs``: (name, elem type, shape) with "" names for omitted optionals."""
    node = helper.make_node(op, [n for n, _, _ in inputs], [n for n, _, _ in outputs], domain=domain, **attrs)
    init_names = {i.name for i in initializers}
    return make_model([node], [i for i in inputs if i[0] and i[0] not in init_names], outputs, initializers,
                      opset=17, extra_opsets={MS: 1})


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# --- GELU family, BiasAdd, BiasSoftmax -------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 8), (5,), (1, 4, 16)])
def test_gelu(shape):
    rng = np.random.default_rng(0)
    model = ms_model("Gelu", [("X", F, shape)], [("Y", F, shape)])
    assert_matches_ort(model, {"X": rand(rng, *shape, scale=3)})


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 8), (4, 16)])
def test_fast_gelu(shape, bias):
    rng = np.random.default_rng(1)
    inputs = [("X", F, shape)] + ([("bias", F, shape[-1:])] if bias else [])
    feeds = {"X": rand(rng, *shape, scale=3)} | ({"bias": rand(rng, shape[-1])} if bias else {})
    assert_matches_ort(ms_model("FastGelu", inputs, [("Y", F, shape)]), feeds)


@pytest.mark.parametrize("shape", [(2, 3, 8), (4, 16)])
def test_bias_gelu(shape):
    rng = np.random.default_rng(2)
    model = ms_model("BiasGelu", [("A", F, shape), ("B", F, shape[-1:])], [("C", F, shape)])
    assert_matches_ort(model, {"A": rand(rng, *shape, scale=3), "B": rand(rng, shape[-1])})


@pytest.mark.parametrize("alpha", [None, 1.0, -0.5])
def test_quick_gelu(alpha):
    rng = np.random.default_rng(3)
    attrs = {} if alpha is None else {"alpha": alpha}
    model = ms_model("QuickGelu", [("X", F, (2, 5, 8))], [("Y", F, (2, 5, 8))], **attrs)
    assert_matches_ort(model, {"X": rand(rng, 2, 5, 8, scale=4)})


def test_bias_add():
    """onnxruntime computes BiasAdd on GPUs only: numpy gives the expected values."""
    rng = np.random.default_rng(4)
    x, bias, skip = rand(rng, 2, 6, 8), rand(rng, 8), rand(rng, 2, 6, 8)
    model = ms_model("BiasAdd", [("X", F, (2, 6, 8)), ("bias", F, (8,)), ("skip", F, (2, 6, 8))],
                     [("Y", F, (2, 6, 8))])
    y, = run_onnxc(model, {"X": x, "bias": bias, "skip": skip})
    np.testing.assert_array_equal(y, (x + bias) + skip)


def test_unknown_attribute_is_refused():
    model = ms_model("FastGelu", [("X", F, (2, 3))], [("Y", F, (2, 3))], approximate="tanh")
    with pytest.raises(Exception, match="unknown attribute 'approximate'"):
        run_onnxc(model, {"X": np.zeros((2, 3), np.float32)})


# --- skip / simplified layer normalizations ------------------------------------------------------

def _skip_norm_case(op, shape, skip_shape, beta, bias, outputs, epsilon):
    rng = np.random.default_rng(5)
    hidden = shape[-1]
    inputs = [("input", F, shape), ("skip", F, skip_shape), ("gamma", F, (hidden,))]
    feeds = {"input": rand(rng, *shape), "skip": rand(rng, *skip_shape), "gamma": rand(rng, hidden)}
    if op == "SkipLayerNormalization":
        inputs.append(("beta", F, (hidden,)) if beta else ("", F, ()))
        if beta:
            feeds["beta"] = rand(rng, hidden)
    if bias:
        inputs.append(("bias", F, (hidden,)))
        feeds["bias"] = rand(rng, hidden)
    while not inputs[-1][0]:
        inputs.pop()
    stats = shape[:-1] + (1,)
    out_shapes = {"output": shape, "mean": stats, "inv_std_var": stats, "input_skip_bias_sum": shape}
    outs = [(name, F, out_shapes[name]) if name else ("", F, ()) for name in outputs]
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    node = helper.make_node(op, [n for n, _, _ in inputs], [n for n, _, _ in outs], domain=MS, **attrs)
    model = make_model([node], [i for i in inputs if i[0]], [o for o in outs if o[0]], opset=17,
                       extra_opsets={MS: 1})
    return model, feeds


ALL_OUTPUTS = ["output", "mean", "inv_std_var", "input_skip_bias_sum"]


@pytest.mark.parametrize("shape,skip_shape", [((2, 5, 16), (2, 5, 16)), ((2, 5, 16), (5, 16)),
                                              ((2, 5, 16), (1, 5, 16)), ((6, 32), (6, 32))])
@pytest.mark.parametrize("beta,bias", [(False, False), (True, False), (True, True), (False, True)])
def test_skip_layer_normalization(shape, skip_shape, beta, bias):
    model, feeds = _skip_norm_case("SkipLayerNormalization", shape, skip_shape, beta, bias, ALL_OUTPUTS, None)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("outputs", [["output"], ["output", "", "", "input_skip_bias_sum"],
                                     ["output", "", "inv_std_var"]])
@pytest.mark.parametrize("epsilon", [None, 1e-3])
def test_skip_layer_normalization_outputs(outputs, epsilon):
    model, feeds = _skip_norm_case("SkipLayerNormalization", (3, 4, 8), (3, 4, 8), True, True, outputs, epsilon)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("shape,skip_shape", [((2, 5, 16), (2, 5, 16)), ((2, 5, 16), (5, 16)), ((6, 32), (6, 32))])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("outputs", [ALL_OUTPUTS, ["output"], ["output", "", "", "input_skip_bias_sum"]])
def test_skip_simplified_layer_normalization(shape, skip_shape, bias, outputs):
    model, feeds = _skip_norm_case("SkipSimplifiedLayerNormalization", shape, skip_shape, False, bias, outputs, 1e-5)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("shape,axis", [((2, 5, 16), -1), ((2, 5, 16), 1), ((4, 8), -1)])
@pytest.mark.parametrize("inv_std", [False, True])
def test_simplified_layer_normalization(shape, axis, inv_std):
    rng = np.random.default_rng(6)
    scale_shape = shape[axis:]
    stats = shape[:axis % len(shape)] + (1,) * (len(shape) - axis % len(shape))
    outputs = [("Y", F, shape)] + ([("inv_std_var", F, stats)] if inv_std else [])
    model = ms_model("SimplifiedLayerNormalization", [("X", F, shape), ("scale", F, scale_shape)], outputs,
                     domain="", axis=axis, epsilon=1e-4)
    assert_matches_ort(model, {"X": rand(rng, *shape), "scale": rand(rng, *scale_shape)})
