"""onnxruntime's com.microsoft transformer and misc contrib ops against onnxruntime (or, for the
ops onnxruntime computes only on GPUs, against numpy) on random inputs."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from helpers import assert_matches_ort, make_model, run_onnxc, run_ort
from tools import require_module

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
@pytest.mark.parametrize("beta,bias", [(False, False), (True, True)])
def test_skip_layer_normalization(shape, skip_shape, beta, bias):
    model, feeds = _skip_norm_case("SkipLayerNormalization", shape, skip_shape, beta, bias, ALL_OUTPUTS, None)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("outputs", [["output"], ["output", "", "", "input_skip_bias_sum"],
                                     ["output", "", "inv_std_var"]])
@pytest.mark.parametrize("epsilon", [None, 1e-3])
@pytest.mark.parametrize("beta,bias", [(True, False), (False, True)])
def test_skip_layer_normalization_outputs(outputs, epsilon, beta, bias):
    model, feeds = _skip_norm_case("SkipLayerNormalization", (3, 4, 8), (3, 4, 8), beta, bias, outputs, epsilon)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("shape,skip_shape,bias,outputs", [
    ((2, 5, 16), (2, 5, 16), False, ALL_OUTPUTS), ((2, 5, 16), (2, 5, 16), True, ALL_OUTPUTS),
    ((2, 5, 16), (5, 16), True, ALL_OUTPUTS), ((6, 32), (6, 32), False, ALL_OUTPUTS),
    ((2, 5, 16), (2, 5, 16), True, ["output"]),
    ((2, 5, 16), (1, 5, 16), False, ["output", "", "", "input_skip_bias_sum"]),
    ((6, 32), (6, 32), True, ["output", "", "inv_std_var"])])
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


@pytest.mark.parametrize("shape,bias_shape,axis,inner", [((2, 4, 5, 5), (2, 1, 5, 5), 3, 0),
                                                        ((2, 4, 5, 5), (1, 4, 5, 5), 3, 1),
                                                        ((3, 6, 7), (3, 6, 7), 1, 0)])
def test_bias_softmax(shape, bias_shape, axis, inner):
    """onnxruntime computes BiasSoftmax on GPUs only: numpy gives the expected values (Softmax-11:
    the axes from ``axis`` on are one)."""
    rng = np.random.default_rng(7)
    data, bias = rand(rng, *shape, scale=3), rand(rng, *bias_shape, scale=3)
    model = ms_model("BiasSoftmax", [("data", F, shape), ("bias", F, bias_shape)], [("output", F, shape)],
                     axis=axis, is_inner_broadcast=inner)
    y, = run_onnxc(model, {"data": data, "bias": bias})
    rows = (data + bias).reshape(int(np.prod(shape[:axis])), -1).astype(np.float64)
    want = np.exp(rows - rows.max(1, keepdims=True))
    np.testing.assert_allclose(y, (want / want.sum(1, keepdims=True)).reshape(shape), rtol=1e-5, atol=1e-6)


# --- FusedMatMul, FusedGemm, FusedConv -----------------------------------------------------------

@pytest.mark.parametrize("a_shape,b_shape,attrs", [
    ((3, 4), (4, 5), {}),
    ((4, 3), (4, 5), {"transA": 1, "alpha": 0.5}),
    ((2, 3, 4), (5, 4), {"transB": 1, "alpha": -2.0}),
    ((2, 4, 3), (2, 5, 4), {"transA": 1, "transB": 1}),
    ((3, 2, 4), (2, 4, 5), {"transBatchA": 1}),
    ((3, 2, 4), (2, 5, 4), {"transBatchA": 1, "transB": 1, "alpha": 0.25}),
    ((2, 3, 4), (4, 2, 5), {"transBatchB": 1}),
    ((6, 2, 3, 4), (2, 3, 5, 6), {"transBatchA": 1, "transA": 1, "transB": 1}),
])
def test_fused_mat_mul(a_shape, b_shape, attrs):
    rng = np.random.default_rng(8)
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    y_shape = (_moved(a, attrs.get("transBatchA"), attrs.get("transA")) @
               _moved(b, attrs.get("transBatchB"), attrs.get("transB"))).shape
    model = ms_model("FusedMatMul", [("A", F, a_shape), ("B", F, b_shape)], [("Y", F, y_shape)], **attrs)
    assert_matches_ort(model, {"A": a, "B": b})


def _moved(x, batch, trans):
    if batch:
        x = np.moveaxis(x, 0, -2)
    return np.swapaxes(x, -1, -2) if trans else x


@pytest.mark.parametrize("activation,params", [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}),
                                               ("LeakyRelu", {"activation_alpha": 0.2}),
                                               ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
                                               ("Elu", {"activation_alpha": 0.7})])
@pytest.mark.parametrize("gemm", [{}, {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}])
def test_fused_gemm(activation, params, gemm):
    rng = np.random.default_rng(9)
    a_shape = (4, 3) if gemm.get("transA") else (3, 4)
    b_shape = (5, 4) if gemm.get("transB") else (4, 5)
    model = ms_model("FusedGemm", [("A", F, a_shape), ("B", F, b_shape), ("C", F, (5,))], [("Y", F, (3, 5))],
                     activation=activation, **params, **gemm)
    assert_matches_ort(model, {"A": rand(rng, *a_shape), "B": rand(rng, *b_shape), "C": rand(rng, 5)})


@pytest.mark.parametrize("activation,params,bias,residual", [
    ("", (), True, True), ("Relu", (), True, True), ("LeakyRelu", (0.1,), True, True),
    ("Clip", (-0.5, 0.5), True, True),
    ("HardSigmoid", (0.3, 0.6), True, True), ("Sigmoid", (), True, True), ("Tanh", (), True, True),
    ("Relu", (), True, False), ("LeakyRelu", (0.05,), False, True), ("", (), False, False)])
def test_fused_conv(activation, params, bias, residual):
    rng = np.random.default_rng(10)
    inputs = [("X", F, (2, 3, 7, 7)), ("W", F, (4, 3, 3, 3)), ("B", F, (4,)) if bias else ("", F, ())]
    feeds = {"X": rand(rng, 2, 3, 7, 7), "W": rand(rng, 4, 3, 3, 3)} | ({"B": rand(rng, 4)} if bias else {})
    if residual:
        inputs.append(("Z", F, (2, 4, 3, 3)))
        feeds["Z"] = rand(rng, 2, 4, 3, 3)
    attrs = {"activation": activation} if activation else {}
    if params:
        attrs["activation_params"] = list(params)
    model = ms_model("FusedConv", inputs, [("Y", F, (2, 4, 3, 3))], pads=[1, 1, 0, 0], strides=[2, 2],
                     kernel_shape=[3, 3], **attrs)
    model.graph.ClearField("input")
    model.graph.input.extend([helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n])
    assert_matches_ort(model, feeds)


# --- Trilu, GridSample ----------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
def test_trilu(upper, k):
    rng = np.random.default_rng(11)
    inputs = [("X", F, (2, 4, 5))] + ([("k", T.INT64, ())] if k is not None else [])
    feeds = {"X": rand(rng, 2, 4, 5)} | ({"k": np.array(k, np.int64)} if k is not None else {})
    assert_matches_ort(ms_model("Trilu", inputs, [("Y", F, (2, 4, 5))], upper=upper), feeds)


@pytest.mark.parametrize("mode,padding_mode,align_corners", [
    ("bilinear", "zeros", 0), ("bilinear", "border", 1), ("bilinear", "reflection", 0),
    ("nearest", "zeros", 1), ("bicubic", "zeros", 0), ("bicubic", "reflection", 1)])
def test_grid_sample(mode, padding_mode, align_corners):
    """The mode names of GridSample-16, mapped to ai.onnx GridSample's (whose kernel other tests cover)."""
    rng = np.random.default_rng(12)
    x, grid = rand(rng, 2, 3, 5, 6), rng.uniform(-1.2, 1.2, (2, 4, 3, 2)).astype(np.float32)
    model = ms_model("GridSample", [("X", F, (2, 3, 5, 6)), ("Grid", F, (2, 4, 3, 2))], [("Y", F, (2, 3, 4, 3))],
                     mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert_matches_ort(model, {"X": x, "Grid": grid})


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 2, 1, 1), (2, 7, 7)])
def test_inverse(shape):
    """Well-conditioned matrices (random plus a dominant diagonal) so that float32 results of two
    elimination orders agree to 1e-4."""
    rng = np.random.default_rng(13)
    x = rand(rng, *shape) + 3 * np.eye(shape[-1], dtype=np.float32)
    assert_matches_ort(ms_model("Inverse", [("X", F, shape)], [("Y", F, shape)]), {"X": x})


def test_inverse_symbolic_batch():
    rng = np.random.default_rng(14)
    x = rand(rng, 3, 4, 4) + 3 * np.eye(4, dtype=np.float32)
    y, = run_onnxc(ms_model("Inverse", [("X", F, ("b", 4, 4))], [("Y", F, ("b", 4, 4))]), {"X": x})
    np.testing.assert_allclose(y @ x, np.broadcast_to(np.eye(4), x.shape), atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1], "strides": [2, 1]},
                                   {"group": 2, "dilations": [2, 2]}, {"auto_pad": "SAME_UPPER"}])
def test_nhwc_conv(bias, attrs):
    """onnxruntime computes NhwcConv on GPUs only: its Conv on the channels-first data gives the
    expected values."""
    rng = np.random.default_rng(15)
    group = attrs.get("group", 1)
    x, w, b = rand(rng, 2, 7, 6, 4), rand(rng, 6, 3, 3, 4 // group), rand(rng, 6)
    conv = make_model([helper.make_node("Conv", ["X", "W"] + (["B"] if bias else []), ["Y"], **attrs)],
                      [("X", F, (2, 4, 7, 6)), ("W", F, (6, 4 // group, 3, 3))] + ([("B", F, (6,))] if bias else []),
                      [("Y", F, None)], opset=17)
    feeds = {"X": x.transpose(0, 3, 1, 2), "W": w.transpose(0, 3, 1, 2)} | ({"B": b} if bias else {})

    want = run_ort(conv, feeds)[0].transpose(0, 2, 3, 1)
    inputs = [("X", F, x.shape), ("W", F, w.shape)] + ([("B", F, (6,))] if bias else [])
    model = ms_model("NhwcConv", inputs, [("Y", F, want.shape)], kernel_shape=[3, 3], **attrs)
    y, = run_onnxc(model, {"X": x, "W": w} | ({"B": b} if bias else {}))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


# --- attention ------------------------------------------------------------------------------------

def _attention_case(rng, batch, seq, hidden, heads, mask=None, past=0, bias=True, attention_bias=False,
                    sizes=None, **attrs):
    """com.microsoft Attention: its model and feeds; ``mask``: None, "end", "end_start", "2d", "3d"."""
    sizes = sizes or (hidden,) * 3
    total = past + seq
    feeds = {"input": rand(rng, batch, seq, hidden), "weights": rand(rng, hidden, sum(sizes), scale=0.3)}
    inputs = [("input", F, ("b", "s", hidden)), ("weights", F, (hidden, sum(sizes)))]
    if bias:
        feeds["bias"] = rand(rng, sum(sizes), scale=0.3)
    inputs.append(("bias", F, (sum(sizes),)) if bias else ("", F, ()))
    lengths = rng.integers(1, total + 1, batch)
    if mask in ("end", "end_start"):
        starts = np.minimum(rng.integers(0, 2, batch), lengths - 1)
        value = lengths if mask == "end" else np.concatenate([lengths, starts])
        feeds["mask_index"] = value.astype(np.int32)
        inputs.append(("mask_index", T.INT32, (feeds["mask_index"].shape[0],)))
    elif mask == "2d":
        feeds["mask_index"] = (np.arange(total)[None, :] < lengths[:, None]).astype(np.int32)
        inputs.append(("mask_index", T.INT32, ("b", "t")))
    elif mask == "3d":
        feeds["mask_index"] = (rng.random((batch, seq, total)) > 0.3).astype(np.int32)
        feeds["mask_index"][:, :, 0] = 1
        inputs.append(("mask_index", T.INT32, ("b", "s", "t")))
    else:
        inputs.append(("", F, ()))
    if past:
        feeds["past"] = rand(rng, 2, batch, heads, past, sizes[0] // heads)
    inputs.append(("past", F, (2, "b", heads, "p", sizes[0] // heads)) if past else ("", F, ()))
    if attention_bias:
        feeds["attention_bias"] = rand(rng, 1, heads, seq, total)
        inputs.append(("attention_bias", F, (1, heads, "s", "t")))
    while not inputs[-1][0]:
        inputs.pop()
    outputs = [("output", F, ("b", "s", sizes[2]))]
    if past:
        outputs.append(("present", F, (2, "b", heads, "t", sizes[0] // heads)))
    if sizes != (hidden,) * 3:
        attrs["qkv_hidden_sizes"] = list(sizes)
    node = helper.make_node("Attention", [n for n, _, _ in inputs], [n for n, _, _ in outputs], domain=MS,
                            num_heads=heads, **attrs)
    return make_model([node], [i for i in inputs if i[0]], outputs, opset=17, extra_opsets={MS: 1}), feeds


@pytest.mark.parametrize("mask", [None, "end", "end_start", "2d", "3d"])
@pytest.mark.parametrize("shape", [(2, 5, 16, 2), (1, 3, 24, 3)])
def test_attention_masks(mask, shape):
    model, feeds = _attention_case(np.random.default_rng(16), *shape, mask=mask)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("case", [
    {"unidirectional": 1},
    {"past": 3},
    {"past": 3, "unidirectional": 1, "mask": "2d"},
    {"past": 2, "mask": "end"},
    {"attention_bias": True, "mask": "2d"},
    {"bias": False, "scale": 0.3},
    {"sizes": (16, 16, 8)},
    {"mask": "2d", "mask_filter_value": -1000.0},
])
def test_attention_variants(case):
    model, feeds = _attention_case(np.random.default_rng(17), 2, 4, 16, 2, **case)
    assert_matches_ort(model, feeds)


# --- EmbedLayerNormalization ----------------------------------------------------------------------

@pytest.mark.parametrize("segments,mask,positions,outputs", [
    (True, True, None, 2), (False, False, None, 2), (True, False, None, 3), (True, True, "batch", 3),
    (False, True, "one", 2)])
def test_embed_layer_normalization(segments, mask, positions, outputs):
    rng = np.random.default_rng(18)
    batch, seq, hidden, vocab = 2, 5, 16, 30
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int32)}
    inputs = [("input_ids", T.INT32, ("b", "s"))]
    if segments:
        feeds["segment_ids"] = rng.integers(0, 2, (batch, seq)).astype(np.int32)
    inputs.append(("segment_ids", T.INT32, ("b", "s")) if segments else ("", F, ()))
    tables = {"word_embedding": (vocab, hidden), "position_embedding": (8, hidden)}
    if segments:
        tables["segment_embedding"] = (2, hidden)
    inits = [numpy_helper.from_array(rand(rng, *shape), name) for name, shape in tables.items()]
    inputs += [("word_embedding", F, ()), ("position_embedding", F, ()),
               ("segment_embedding", F, ()) if segments else ("", F, ()),
               ("gamma", F, (hidden,)), ("beta", F, (hidden,))]
    feeds |= {"gamma": rand(rng, hidden), "beta": rand(rng, hidden)}
    if mask:
        feeds["mask"] = (np.arange(seq)[None, :] < np.array([[seq], [2]])).astype(np.int32)
    inputs.append(("mask", T.INT32, ("b", "s")) if mask else ("", F, ()))
    if positions:
        rows = batch if positions == "batch" else 1
        feeds["position_ids"] = rng.integers(0, 8, (rows, seq)).astype(np.int32)
        inputs.append(("position_ids", T.INT32, (rows, "s")))
    while not inputs[-1][0]:
        inputs.pop()
    outs = [("output", F, ("b", "s", hidden)), ("mask_index", T.INT32, ("b",)),
            ("embedding_sum", F, ("b", "s", hidden))][:outputs]
    model = ms_model("EmbedLayerNormalization", inputs, outs, initializers=inits, epsilon=1e-5)
    assert_matches_ort(model, feeds)


# --- onnxruntime's transformer optimizer, end to end ------------------------------------------------

def _optimized(model, model_type, tmp_path, **kwargs):
    require_module("sympy")     # the optimizer's symbolic shape inference
    from onnxruntime.transformers.optimizer import optimize_model
    path, optimized = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    onnx.save(model, path)
    optimize_model(str(path), model_type=model_type, opt_level=0, **kwargs).save_model_to_file(str(optimized))
    return onnx.load(optimized)


def test_bert_optimized_by_onnxruntime(tmp_path):
    from models import bert_export
    model = _optimized(bert_export(), "bert", tmp_path, num_heads=2, hidden_size=32)
    fused = {n.op_type for n in model.graph.node if n.domain == MS}
    assert fused == {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}, fused
    rng = np.random.default_rng(19)
    for batch, seq, lengths in ((2, 7, (7, 4)), (1, 3, (3,)), (3, 16, (16, 1, 9))):
        feeds = {"input_ids": rng.integers(0, 50, (batch, seq)), "token_type_ids": rng.integers(0, 2, (batch, seq)),
                 "attention_mask": (np.arange(seq)[None] < np.array(lengths)[:, None]).astype(np.int64)}
        assert_matches_ort(model, feeds)


def _mha_case(rng, batch, seq, kv_seq, hidden, heads, bias=False, mask=None, past=0, attention_bias=False,
              present=False, **attrs):
    d = hidden // heads
    total = past + kv_seq
    feeds = {"query": rand(rng, batch, seq, hidden), "key": rand(rng, batch, kv_seq, hidden),
             "value": rand(rng, batch, kv_seq, hidden)}
    inputs = [("query", F, ("b", "s", hidden)), ("key", F, ("b", "l", hidden)), ("value", F, ("b", "l", hidden))]
    if bias:
        feeds["bias"] = rand(rng, 3 * hidden)
    inputs.append(("bias", F, (3 * hidden,)) if bias else ("", F, ()))
    lengths = rng.integers(1, total + 1, batch)
    if mask == "end":
        feeds["key_padding_mask"] = lengths.astype(np.int32)
        inputs.append(("key_padding_mask", T.INT32, ("b",)))
    elif mask == "2d":
        feeds["key_padding_mask"] = (np.arange(total)[None, :] < lengths[:, None]).astype(np.int32)
        inputs.append(("key_padding_mask", T.INT32, ("b", "t")))
    else:
        inputs.append(("", F, ()))
    if attention_bias:
        feeds["attention_bias"] = rand(rng, batch, 1, seq, total)
    inputs.append(("attention_bias", F, ("b", 1, "s", "t")) if attention_bias else ("", F, ()))
    if past:
        feeds |= {"past_key": rand(rng, batch, heads, past, d), "past_value": rand(rng, batch, heads, past, d)}
        inputs += [("past_key", F, ("b", heads, "p", d)), ("past_value", F, ("b", heads, "p", d))]
    while not inputs[-1][0]:
        inputs.pop()
    outputs = [("output", F, ("b", "s", hidden))]
    if present:
        outputs += [("present_key", F, ("b", heads, "t", d)), ("present_value", F, ("b", heads, "t", d))]
    node = helper.make_node("MultiHeadAttention", [n for n, _, _ in inputs], [n for n, _, _ in outputs], domain=MS,
                            num_heads=heads, **attrs)
    return make_model([node], [i for i in inputs if i[0]], outputs, opset=17, extra_opsets={MS: 1}), feeds


@pytest.mark.parametrize("case", [
    {}, {"bias": True}, {"mask": "end"}, {"mask": "2d", "bias": True}, {"attention_bias": True},
    {"unidirectional": 1, "kv": 5}, {"past": 3, "present": True, "kv": 1, "unidirectional": 1},
    {"past": 2, "present": True, "mask": "2d"}, {"scale": 0.2, "kv": 7},
])
def test_multi_head_attention(case):
    case = dict(case)
    kv = case.pop("kv", 6)
    model, feeds = _mha_case(np.random.default_rng(20), 2, kv if case.get("unidirectional") and not case.get("past")
                             else 4, kv, 16, 2, **case)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("case", [{}, {"mask": "2d"}, {"past": 2, "present": True, "mask": "end"}])
def test_multi_head_attention_keys_split_into_heads(case):
    """key and value as (B, N, L, d), as Whisper's decoder passes its cross-attention keys."""
    heads, d = 2, 8
    model, feeds = _mha_case(np.random.default_rng(26), 2, 4, 6, heads * d, heads, **case)
    for i, name in ((1, "key"), (2, "value")):
        feeds[name] = feeds[name].reshape(2, 6, heads, d).transpose(0, 2, 1, 3).copy()
        model.graph.input[i].CopyFrom(helper.make_tensor_value_info(name, F, ("b", heads, "l", d)))
    assert_matches_ort(model, feeds)


# --- RotaryEmbedding ------------------------------------------------------------------------------

@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout,positions,rotary_dim", [
    ("3d", "ids", 0), ("3d", "offset", 0), ("4d", "ids", 0), ("4d", "offset", 0), ("3d", "ids", 4),
    ("3d-no-heads", "offset", 0)])
def test_rotary_embedding(interleaved, layout, positions, rotary_dim):
    rng = np.random.default_rng(21)
    batch, seq, heads, d, max_pos = 2, 5, 3, 8, 16
    half = (rotary_dim or d) // 2
    x = rand(rng, batch, heads, seq, d) if layout == "4d" else rand(rng, batch, seq, heads * d)
    angles = rng.uniform(0, 6, (max_pos, half))
    feeds = {"input": x, "cos_cache": np.cos(angles).astype(np.float32), "sin_cache": np.sin(angles).astype(np.float32)}
    if positions == "ids":
        feeds["position_ids"] = rng.integers(0, max_pos, (batch, seq)).astype(np.int64)
    else:
        feeds["position_ids"] = np.array([3], np.int64)
    attrs = {"interleaved": interleaved}
    if layout == "3d":
        attrs["num_heads"] = heads
    if rotary_dim:
        attrs["rotary_embedding_dim"] = rotary_dim
    model = ms_model("RotaryEmbedding", [("input", F, x.shape), ("position_ids", T.INT64, feeds["position_ids"].shape),
                                         ("cos_cache", F, (max_pos, half)), ("sin_cache", F, (max_pos, half))],
                     [("output", F, x.shape)], **attrs)
    assert_matches_ort(model, feeds)


# --- GroupQueryAttention --------------------------------------------------------------------------

def _gqa_case(rng, batch, seq, heads, kv_heads, d, past, lengths, total, **attrs):
    """lengths: seqlens_k + 1 per batch entry; past: the cache length P (None: no past inputs)."""
    feeds = {"query": rand(rng, batch, seq, heads * d), "key": rand(rng, batch, seq, kv_heads * d),
             "value": rand(rng, batch, seq, kv_heads * d)}
    inputs = [("query", F, ("b", "s", heads * d)), ("key", F, ("b", "s", kv_heads * d)),
              ("value", F, ("b", "s", kv_heads * d))]
    if past is not None:
        feeds |= {"past_key": rand(rng, batch, kv_heads, past, d), "past_value": rand(rng, batch, kv_heads, past, d)}
        inputs += [("past_key", F, ("b", kv_heads, "p", d)), ("past_value", F, ("b", kv_heads, "p", d))]
    else:
        inputs += [("", F, ()), ("", F, ())]
    feeds |= {"seqlens_k": np.array(lengths, np.int32) - 1, "total_sequence_length": np.array(total, np.int32)}
    inputs += [("seqlens_k", T.INT32, ("b",)), ("total_sequence_length", T.INT32, ())]
    outputs = [("output", F, ("b", "s", heads * d)), ("present_key", F, ("b", kv_heads, "t", d)),
               ("present_value", F, ("b", kv_heads, "t", d))]
    node = helper.make_node("GroupQueryAttention", [n for n, _, _ in inputs], [n for n, _, _ in outputs],
                            domain=MS, num_heads=heads, kv_num_heads=kv_heads, **attrs)
    return make_model([node], [i for i in inputs if i[0]], outputs, opset=17, extra_opsets={MS: 1}), feeds


@pytest.mark.parametrize("case", [
    # (batch, seq, heads, kv_heads, past, lengths, total)
    (2, 5, 4, 2, None, (5, 5), 5),          # a first prompt
    (2, 5, 4, 4, None, (5, 3), 5),          # a right-padded first prompt
    (2, 1, 4, 2, 6, (7, 7), 7),             # one generated token on a cache of 6
    (2, 1, 6, 2, 6, (7, 4), 7),             # entries of different lengths in one cache
    (1, 3, 4, 1, 4, (7,), 7),               # several new tokens on a cache
    (2, 1, 4, 2, 8, (5, 3), 5),             # a cache buffer longer than the sequence
])
def test_group_query_attention(case):
    batch, seq, heads, kv_heads, past, lengths, total = case
    model, feeds = _gqa_case(np.random.default_rng(22), batch, seq, heads, kv_heads, 8, past, lengths, total)
    assert_matches_ort(model, feeds)


def _packed(model, feeds):
    """The GroupQueryAttention case with Q, K and V in one query input (key and value omitted)."""
    packed = np.concatenate([feeds.pop("query"), feeds.pop("key"), feeds.pop("value")], axis=-1)
    graph = model.graph
    graph.node[0].input[1], graph.node[0].input[2] = "", ""
    graph.input[0].CopyFrom(helper.make_tensor_value_info("query", F, ("b", "s", packed.shape[-1])))
    del graph.input[1:3]
    return model, feeds | {"query": packed}


@pytest.mark.parametrize("case", [(2, 5, 4, 2, None, (5, 3), 5), (2, 1, 4, 2, 6, (7, 4), 7)])
def test_group_query_attention_packed_qkv(case):
    """query holding Q, K and V (key and value omitted), as onnxruntime-genai's models pass them:
    the same results as the three inputs given apart."""
    batch, seq, heads, kv_heads, past, lengths, total = case
    model, feeds = _packed(*_gqa_case(np.random.default_rng(25), batch, seq, heads, kv_heads, 8, past, lengths,
                                      total))
    expected = assert_matches_ort(model, feeds)
    model, feeds = _gqa_case(np.random.default_rng(25), batch, seq, heads, kv_heads, 8, past, lengths, total)
    for a, e in zip(run_onnxc(model, feeds), expected):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("case,interleaved,half,packed", [
    ((2, 5, 4, 2, None, (5, 3), 5), 0, 16, False),      # a right-padded first prompt, the whole head rotated
    ((2, 1, 4, 2, 6, (7, 4), 7), 1, 8, False),          # generated tokens at their cache rows, half the head
    ((1, 3, 4, 1, 4, (7,), 7), 0, 8, True),             # several new tokens, packed QKV
])
def test_group_query_attention_rotary(case, interleaved, half, packed):
    """do_rotary: Q and K rotated at the positions of their cache rows (head size 32; onnxruntime
    takes multiples of 16, and rotary halves of multiples of 8)."""
    batch, seq, heads, kv_heads, past, lengths, total = case
    rng = np.random.default_rng(27)
    model, feeds = _gqa_case(rng, batch, seq, heads, kv_heads, 32, past, lengths, total, do_rotary=1,
                             rotary_interleaved=interleaved)
    angles = np.arange(16)[:, None] * rng.uniform(0.1, 1, half)[None]
    feeds |= {"cos_cache": np.cos(angles).astype(np.float32), "sin_cache": np.sin(angles).astype(np.float32)}
    model.graph.node[0].input.extend(["cos_cache", "sin_cache"])
    model.graph.input.extend([helper.make_tensor_value_info(n, F, [16, half]) for n in ("cos_cache", "sin_cache")])
    assert_matches_ort(*(_packed(model, feeds) if packed else (model, feeds)))


def test_group_query_attention_scale():
    model, feeds = _gqa_case(np.random.default_rng(23), 2, 1, 4, 2, 8, 3, (4, 4), 4, scale=0.5)
    assert_matches_ort(model, feeds)


def test_gpt2_optimized_by_onnxruntime(tmp_path):
    from models import gpt2_export
    model = _optimized(gpt2_export(), "gpt2", tmp_path, num_heads=2, hidden_size=32)
    fused = {n.op_type for n in model.graph.node if n.domain == MS}
    assert fused == {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "FastGelu"}, fused
    assert all(a.i == 1 for n in model.graph.node if n.op_type == "Attention"
               for a in n.attribute if a.name == "unidirectional")
    rng = np.random.default_rng(24)
    for batch, seq in ((2, 5), (1, 1), (3, 16)):
        assert_matches_ort(model, {"input_ids": rng.integers(0, 50, (batch, seq))})


# --- refusals and onnxc info ----------------------------------------------------------------------

@pytest.mark.parametrize("op,inputs,attrs,what", [
    ("GroupQueryAttention", [("query", (1, 2, 16)), ("key", (1, 2, 8)), ("value", (1, 2, 8)), ("", ()), ("", ()),
                             ("seqlens_k", (1,)), ("total_sequence_length", ())],
     {"num_heads": 2, "kv_num_heads": 1, "softcap": 5.0}, "softcap=5.0"),
    ("GroupQueryAttention", [("query", (1, 2, 16)), ("key", (1, 2, 8)), ("value", (1, 2, 8)), ("", ()), ("", ()),
                             ("seqlens_k", (1,)), ("total_sequence_length", ())],
     {"num_heads": 2, "kv_num_heads": 1, "local_window_size": 4}, "local_window_size=4"),
    ("QAttention", [("input", (1, 2, 8), T.UINT8), ("weight", (8, 24), T.INT8), ("bias", (24,)), ("input_scale", ()),
                    ("weight_scale", ())], {"num_heads": 2, "past_present_share_buffer": 1},
     "past_present_share_buffer=1"),
    ("Attention", [("input", (1, 2, 8)), ("weights", (8, 24))], {"num_heads": 2, "do_rotary": 1}, "do_rotary=1"),
    ("MultiHeadAttention", [("query", (1, 2, 8, 3, 4))], {"num_heads": 2}, "packed QKV"),
    ("MultiHeadAttention", [("query", (1, 2, 8)), ("key", (1, 2, 3, 4)), ("value", (1, 2, 3, 4)), ("bias", (24,))],
     {"num_heads": 2}, "a bias with 4-D key and value"),
    ("FusedGemm", [("A", (2, 3)), ("B", (3, 4))], {"activation": "Gelu"}, "activation 'Gelu'"),
    ("RotaryEmbedding", [("input", (1, 2, 8)), ("position_ids", (1,)), ("cos_cache", (4, 2)), ("sin_cache", (4, 2))],
     {"num_heads": 2, "is_packed_batching": 1}, "is_packed_batching=1"),
])
def test_unsupported_variants_are_refused_by_name(op, inputs, attrs, what):
    import onnxc
    types = {"seqlens_k": T.INT32, "total_sequence_length": T.INT32, "position_ids": T.INT64}
    specs = [(n, elem[0] if elem else types.get(n, F), s) for n, s, *elem in inputs]
    model = ms_model(op, specs, [("out", F, ["d"])], **attrs)
    with pytest.raises(onnxc.capi.onnxruntime_pybind11_state.NotImplemented, match=what):
        onnxc.InferenceSession(model.SerializeToString())


@pytest.mark.parametrize("weights, attrs, what", [
    ((24,), {"num_heads": 2}, "weights must be 2-D"),
    ((8, 24), {"num_heads": 0}, "num_heads 0 must be positive"),
    ((8, "w"), {"num_heads": 2}, "unknown width"),
])
def test_attention_with_impossible_weights_is_refused(weights, attrs, what):
    # an IndexError once escaped for 1-D weights: found by the fuzzing campaign (tests/fuzz/)
    import onnxc
    model = ms_model("Attention", [("input", F, (1, 2, 8)), ("weights", F, weights)], [("out", F, ["d"])], **attrs)
    with pytest.raises(onnxc.OnnxcError, match=what):
        onnxc.InferenceSession(model.SerializeToString())


def test_info_names_missing_contrib_ops(tmp_path, capsys):
    from onnxc import cli
    nodes = [helper.make_node("SkipLayerNormalization", ["x", "x", "g"], ["y"], domain=MS),
             helper.make_node("LongformerAttention", ["y", "w", "b", "m", "gw", "gb", "gm"], ["z"], domain=MS,
                              num_heads=2, window=1)]
    model = make_model(nodes, [(n, F, s) for n, s in (("x", (1, 2, 4)), ("g", (4,)), ("w", (4, 12)), ("b", (12,)),
                                                       ("m", (1, 2)), ("gw", (4, 12)), ("gb", (12,)),
                                                       ("gm", (1, 2)))],
                       [("z", F, (1, 2, 4))], opset=17, extra_opsets={MS: 1})
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    code = cli.main(["info", str(path)])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "1 operator(s) not supported: com.microsoft::LongformerAttention" in out
    assert "com.microsoft::SkipLayerNormalization" in out and "NOT SUPPORTED" in out
