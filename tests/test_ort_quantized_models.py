"""Models quantized by onnxruntime's own tools (quantize_dynamic, quantize_static in QDQ and
QOperator formats, MatMulNBitsQuantizer) from small float models built with onnx.helper, run
by onnxc and onnxruntime on the same inputs."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import assert_matches_ort, run_ort
from tools import require_module

quantization = pytest.importorskip("onnxruntime.quantization")
RNG = np.random.default_rng(21)


def weight(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.normal(0, scale, shape).astype(np.float32), name)


def float_model(nodes, inputs, outputs, inits, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "float", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def ops(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)


def quantized(tmp_path, model, tool, *args, **kwargs) -> onnx.ModelProto:
    src, dst = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, src)
    tool(str(src), str(dst), *args, **kwargs)
    return onnx.load(dst)


# --- quantize_dynamic -------------------------------------------------------------------------
# reduce_range=True makes 7-bit int8 weights: onnxruntime's AVX2 uint8 x int8 kernel saturates
# sums of two 8-bit products to int16, where onnxc's sums are exact (see MatMulIntegerToFloat).

def mlp() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
             helper.make_node("Add", ["h3", "b2"], ["y"])]
    return float_model(nodes, [("x", TP.FLOAT, ["n", 16])], [("y", TP.FLOAT, ["n", 8])],
                       [weight("w1", 16, 32), weight("b1", 32), weight("w2", 32, 8), weight("b2", 8)])


def transformer_block() -> onnx.ModelProto:
    """One attention head and a feed-forward layer over [batch, seq, 16], with plain ONNX ops."""
    d = 16
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "sqrt_d"], ["s1"]),
             helper.make_node("Softmax", ["s1"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["a"]),
             helper.make_node("MatMul", ["a", "wo"], ["o"]), helper.make_node("Add", ["x", "o"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w1"], ["f"]), helper.make_node("Relu", ["f"], ["f1"]),
             helper.make_node("MatMul", ["f1", "w2"], ["f2"]), helper.make_node("Add", ["n", "f2"], ["y"])]
    inits = [weight(n, d, d) for n in ("wq", "wk", "wv", "wo")] + [
        numpy_helper.from_array(np.float32(4.0), "sqrt_d"), weight("gamma", d), weight("beta", d),
        weight("w1", d, 32), weight("w2", 32, d)]
    return float_model(nodes, [("x", TP.FLOAT, ["batch", "seq", d])], [("y", TP.FLOAT, ["batch", "seq", d])], inits)


@pytest.mark.parametrize("build,weight_type", [(mlp, "QInt8"), (mlp, "QUInt8"), (transformer_block, "QInt8")])
def test_quantize_dynamic_matmuls(tmp_path, build, weight_type):
    """onnxruntime fuses the DynamicQuantizeLinear / MatMulInteger / Mul chains into
    DynamicQuantizeMatMul or MatMulIntegerToFloat and scales in another order: within 1e-5."""
    q = quantized(tmp_path, build(), quantization.quantize_dynamic,
                  weight_type=getattr(quantization.QuantType, weight_type), reduce_range=True)
    assert ops(q)[("ai.onnx", "MatMulInteger")] >= 2
    shape = [5, 16] if build is mlp else [2, 7, 16]
    for _ in range(3):
        assert_matches_ort(q, {"x": RNG.normal(0, 1, shape).astype(np.float32)}, rtol=1e-5, atol=1e-5)


def lstm(direction: str) -> onnx.ModelProto:
    hidden, inp, batch, dirs = 8, 6, 2, 2 if direction == "bidirectional" else 1
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "y_h", "y_c"],
                            hidden_size=hidden, direction=direction)
    return float_model([node], [("x", TP.FLOAT, [5, batch, inp])],
                       [("y", TP.FLOAT, [5, dirs, batch, hidden]), ("y_h", TP.FLOAT, [dirs, batch, hidden]),
                        ("y_c", TP.FLOAT, [dirs, batch, hidden])],
                       [weight("W", dirs, 4 * hidden, inp), weight("R", dirs, 4 * hidden, hidden),
                        weight("B", dirs, 8 * hidden), weight("h0", dirs, batch, hidden, scale=0.5),
                        weight("c0", dirs, batch, hidden, scale=0.5)])


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_quantize_dynamic_lstm(tmp_path, direction):
    """DynamicQuantizeLSTM: within 5e-3 of onnxruntime (its own sigmoid and tanh, and the hidden
    state requantized every step: see tests/ops/test_contrib_quant.py), and within the
    quantization error of the float LSTM. The initial states are given: onnxruntime 1.32
    computes other first steps without them."""
    float_lstm = lstm(direction)
    q = quantized(tmp_path, float_lstm, quantization.quantize_dynamic, reduce_range=True)
    assert ops(q) == {("com.microsoft", "DynamicQuantizeLSTM"): 1}
    x = RNG.normal(0, 1, [5, 2, 6]).astype(np.float32)
    out = assert_matches_ort(q, {"x": x}, rtol=0, atol=5e-3)
    for a, f in zip(out, run_ort(float_lstm, {"x": x})):
        np.testing.assert_allclose(a, f, rtol=0, atol=0.05)


def fused_bert(tmp_path) -> onnx.ModelProto:
    """A BERT encoder (tests/models.py) as onnxruntime's transformer optimizer fuses it:
    EmbedLayerNormalization, Attention, SkipLayerNormalization and BiasGelu."""
    require_module("sympy")     # the optimizer's symbolic shape inference
    from onnxruntime.transformers.optimizer import optimize_model

    from models import bert_export
    src, dst = tmp_path / "bert.onnx", tmp_path / "fused.onnx"
    onnx.save(bert_export(), src)
    optimize_model(str(src), model_type="bert", opt_level=0, num_heads=2, hidden_size=32).save_model_to_file(str(dst))
    return onnx.load(dst)


@pytest.mark.parametrize("weight_type", ["QInt8", "QUInt8"])
def test_quantize_dynamic_fused_bert(tmp_path, weight_type):
    """quantize_dynamic turns the fused Attention into QAttention (8-bit QKV projection) and
    EmbedLayerNormalization into QEmbedLayerNormalization (8-bit tables). The integer products
    are exact in both; float sums in another order stay within 1e-4 relative, and no
    DynamicQuantizeLinear in between rounds a value to another code on these inputs, which the
    test's own generator makes whatever ran before it (random tokens hit such a boundary often
    enough: 4 of 40 seeds of the 3 x 16 case, where a token's row then differs by up to 0.03).
    onnx's shape inference cannot type the outputs of com.microsoft nodes: DefaultTensorType
    says they are float."""
    q = quantized(tmp_path, fused_bert(tmp_path), quantization.quantize_dynamic,
                  weight_type=getattr(quantization.QuantType, weight_type), reduce_range=True,
                  extra_options={"DefaultTensorType": TP.FLOAT})
    found = ops(q)
    assert found[("com.microsoft", "QAttention")] == 2 and found[("com.microsoft", "QEmbedLayerNormalization")] == 1, \
        dict(found)
    assert found[("com.microsoft", "Attention")] == 0 and found[("com.microsoft", "EmbedLayerNormalization")] == 0
    rng = np.random.default_rng(21)
    for batch, seq, lengths in ((2, 7, (7, 4)), (1, 3, (3,)), (3, 16, (16, 1, 9))):
        feeds = {"input_ids": rng.integers(0, 50, (batch, seq)), "token_type_ids": rng.integers(0, 2, (batch, seq)),
                 "attention_mask": (np.arange(seq)[None] < np.array(lengths)[:, None]).astype(np.int64)}
        assert_matches_ort(q, feeds)


# --- quantize_static ----------------------------------------------------------------------------

def cnn() -> onnx.ModelProto:
    """Conv, Relu, a residual Add, Sigmoid gating (Mul), LeakyRelu, AveragePool, Concat,
    GlobalAveragePool, Flatten, Gemm, Softmax over [n, 3, 12, 12]."""
    nodes = [helper.make_node("Conv", ["x", "c1", "cb1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["a1"]),
             helper.make_node("Conv", ["a1", "c2", "cb2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["a1", "b"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["g"]), helper.make_node("Mul", ["r", "g"], ["m"]),
             helper.make_node("LeakyRelu", ["m"], ["l"], alpha=0.1),
             helper.make_node("AveragePool", ["l"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["l"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["p", "p2"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["y"], axis=-1)]
    inits = [weight("c1", 8, 3, 3, 3), weight("cb1", 8), weight("c2", 8, 8, 3, 3, scale=0.1), weight("cb2", 8),
             weight("fc", 10, 16), weight("fcb", 10)]
    return float_model(nodes, [("x", TP.FLOAT, ["n", 3, 12, 12])], [("y", TP.FLOAT, ["n", 10])], inits)


class RandomBatches(quantization.CalibrationDataReader):
    def __init__(self, count: int = 4):
        self.batches = iter([{"x": RNG.normal(0, 1, [2, 3, 12, 12]).astype(np.float32)} for _ in range(count)])

    def get_next(self):
        return next(self.batches, None)


def test_quantize_static_qoperator_cnn(tmp_path):
    """The QOperator model's quantized ops are exact in onnxruntime, so the whole model is."""
    q = quantized(tmp_path, cnn(), quantization.quantize_static, RandomBatches(),
                  quant_format=quantization.QuantFormat.QOperator, activation_type=quantization.QuantType.QUInt8,
                  weight_type=quantization.QuantType.QUInt8)
    found = ops(q)
    for op in ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool",
               "QLinearConcat", "QLinearGlobalAveragePool", "QLinearSoftmax", "QGemm"):
        assert found[("com.microsoft", op)] >= 1, f"{op} missing from {dict(found)}"
    for _ in range(3):
        assert_matches_ort(q, {"x": RNG.normal(0, 1, [3, 3, 12, 12]).astype(np.float32)}, rtol=0, atol=0)


def run_ort_basic(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime with its basic optimizations only: the QDQ model computed as written."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("activation_type", ["QUInt8", "QInt8"])
def test_quantize_static_qdq_cnn(tmp_path, activation_type):
    """onnxc computes the QDQ model as written (DequantizeLinear, the float op, QuantizeLinear), as
    onnxruntime does with basic optimizations; float32 sums in another order (Conv, Gemm, Softmax)
    can put a value on the other side of a rounding boundary of the next QuantizeLinear, so a
    probability may move by an output step (1/255), or by two where the value that moved was a
    logit before the Softmax (one step of the logits' scale moves p by about p (1 - p) of it).
    onnxruntime's default level also fuses Sigmoid, Mul, AveragePool, Softmax ... with their
    Q/DQ into its quantized kernels, whose rounding differs more: a few steps. (The inputs come
    from this test's own generator, not the module's, whose state depends on the tests before.)"""
    rng = np.random.default_rng(200)
    q = quantized(tmp_path, cnn(), quantization.quantize_static, RandomBatches(),
                  quant_format=quantization.QuantFormat.QDQ,
                  activation_type=getattr(quantization.QuantType, activation_type),
                  weight_type=quantization.QuantType.QInt8)
    assert ops(q)[("ai.onnx", "QuantizeLinear")] >= 5
    for _ in range(3):
        x = rng.normal(0, 1, [3, 3, 12, 12]).astype(np.float32)
        out = assert_matches_ort(q, {"x": x}, rtol=0, atol=6 / 255)[0]
        basic = run_ort_basic(q, {"x": x})[0]
        np.testing.assert_allclose(out, basic, rtol=0, atol=2.5 / 255)
        assert np.mean(out == basic) >= 0.8


# --- 4-bit weights --------------------------------------------------------------------------------

def decoder_stack(vocab: int = 50, d: int = 64) -> onnx.ModelProto:
    """Token embedding (Gather), two MLP blocks with SiLU and residuals, a LayerNorm and the
    output projection: the MatMul stack of a small decoder."""
    nodes = [helper.make_node("Gather", ["embed", "ids"], ["h0"])]
    h = "h0"
    for i in range(2):
        nodes += [helper.make_node("MatMul", [h, f"up{i}"], [f"u{i}"]),
                  helper.make_node("Sigmoid", [f"u{i}"], [f"s{i}"]),
                  helper.make_node("Mul", [f"u{i}", f"s{i}"], [f"a{i}"]),
                  helper.make_node("MatMul", [f"a{i}", f"down{i}"], [f"d{i}"]),
                  helper.make_node("Add", [h, f"d{i}"], [f"h{i + 1}"])]
        h = f"h{i + 1}"
    nodes += [helper.make_node("LayerNormalization", [h, "gamma", "beta"], ["n"], axis=-1),
              helper.make_node("MatMul", ["n", "lm_head"], ["y"])]
    inits = [weight("embed", vocab, d)] + [w for i in range(2) for w in (weight(f"up{i}", d, 2 * d, scale=0.1),
                                                                         weight(f"down{i}", 2 * d, d, scale=0.1))]
    inits += [weight("gamma", d), weight("beta", d), weight("lm_head", d, vocab, scale=0.1)]
    return float_model(nodes, [("ids", TP.INT64, ["batch", "seq"])], [("y", TP.FLOAT, ["batch", "seq", vocab])],
                       inits, opset=21)


@pytest.mark.parametrize("is_symmetric", [False, True])
@pytest.mark.parametrize("block_size", [32, 64])
def test_matmul_nbits_quantizer(is_symmetric, block_size):
    """MatMulNBits and GatherBlockQuantized from MatMulNBitsQuantizer: float32 sums in another
    order than onnxruntime's, within 1e-4 of the largest logit."""
    nbits = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
    config = nbits.DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=is_symmetric,
                                                op_types_to_quantize=("MatMul", "Gather"),
                                                quant_axes=(("MatMul", 0), ("Gather", 1)))
    quantizer = nbits.MatMulNBitsQuantizer(decoder_stack(), algo_config=config)
    quantizer.process()
    q = quantizer.model.model
    found = ops(q)
    assert found[("com.microsoft", "MatMulNBits")] == 5 and found[("com.microsoft", "GatherBlockQuantized")] == 1, \
        dict(found)
    ids = RNG.integers(0, 50, [2, 6]).astype(np.int64)
    expected = run_ort(q, {"ids": ids})[0]
    assert_matches_ort(q, {"ids": ids}, rtol=0, atol=1e-4 * float(np.abs(expected).max()))
