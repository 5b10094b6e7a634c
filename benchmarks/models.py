"""The benchmark models: builders returning ``onnx.ModelProto`` and a feed for each.

Everything is seeded, so two runs (or two machines) time the same weights and inputs.
The light zoo comes from the installed onnx package; the rest is built here, each
model shaped like a family people deploy (a BERT encoder, a YOLO detector, an MLP, a
small LSTM, a tiny CNN).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Callable

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, helper, numpy_helper

from .builder import GraphBuilder

LIGHT_ZOO = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
             "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512"]

Feed = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class BenchModel:
    """A registry entry. ``quick`` models take under 1 ms in onnxruntime: the smoke mode runs
    only them, and the issue holds them to a stricter ratio target (call overhead dominates)."""
    name: str
    build: Callable[[], onnx.ModelProto]
    feed: Callable[[onnx.ModelProto], Feed]
    quick: bool = False


# --- the onnx package's light zoo --------------------------------------------------------------------------

def light_model_path(name: str) -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"{name}.onnx")


def light_zoo_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """A light-zoo model with random real-valued weights that both runtimes see as constants.

    The files make every weight with a ConstantOfShape (constant values: a poor benchmark,
    and foldable), so those become random initializers. The files also list initializers as
    graph inputs (IR 3 style); onnxruntime treats such initializers as overridable and then
    neither folds nor fuses them, so those inputs are removed.
    """
    model = onnx.load(light_model_path(name))
    graph = model.graph
    shapes = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    positive = {n.input[k] for n in graph.node if n.op_type == "BatchNormalization" for k in (1, 4)}
    rng = np.random.default_rng(seed)
    kept, weights = [], []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[node.input[0]])
            weights.append(numpy_helper.from_array(random_weight(rng, shape, node.output[0] in positive),
                                                   node.output[0]))
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(weights)
    initialized = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initialized]
    del graph.input[:]
    graph.input.extend(inputs)
    _drop_unused_initializers(graph)
    model.ir_version = max(model.ir_version, 4)  # IR 3 requires every initializer to be an input
    return model


def random_weight(rng: np.random.Generator, shape: tuple[int, ...], positive: bool) -> np.ndarray:
    """He-scaled weights keep activations in range; BatchNorm scale and variance stay positive."""
    if positive:
        value = rng.uniform(0.5, 1.5, shape)
    elif len(shape) >= 2:
        value = rng.standard_normal(shape) * math.sqrt(2.0 / int(np.prod(shape[1:])))
    else:
        value = rng.standard_normal(shape) * 0.1
    return value.astype(np.float32)


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """The ConstantOfShape shape tensors are dead once their nodes are gone."""
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def random_feed(model: onnx.ModelProto, seed: int = 1) -> Feed:
    """Standard-normal float32 inputs of each (fixed) input shape."""
    rng = np.random.default_rng(seed)
    feed = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feed[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def logits_model(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model`` with each output that a Softmax makes replaced by the Softmax's input, or None
    when no output is one. A classifier with random weights gives logits far apart, so its
    Softmax saturates to 0 and 1, which says nothing of how accurate the products before it are."""
    producers = {out: node for node in model.graph.node for out in node.output}
    softmaxes = {o.name: producers[o.name] for o in model.graph.output
                 if o.name in producers and producers[o.name].op_type == "Softmax"}
    if not softmaxes:
        return None
    logits = onnx.ModelProto()
    logits.CopyFrom(model)
    kept = [n for n in logits.graph.node if not (n.op_type == "Softmax" and n.output[0] in softmaxes)]
    del logits.graph.node[:]
    logits.graph.node.extend(kept)
    for output in logits.graph.output:
        if output.name in softmaxes:
            output.name = softmaxes[output.name].input[0]
    return logits


def _float_input(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# --- small models (under 1 ms in onnxruntime) ---------------------------------------------------------------

def mlp(sizes: tuple[int, ...] = (784, 512, 256, 10), seed: int = 0) -> onnx.ModelProto:
    """An MNIST-sized MLP, batch 1: Gemm layers as PyTorch exports them (transB=1) alternating
    with MatMul+Add as other exporters write them, ReLU between."""
    b = GraphBuilder(seed)
    x = "x"
    for layer, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        bias = b.normal(0.1, n_out)
        if layer % 2 == 0:
            x = b.op("Gemm", [x, b.he_weight(n_out, n_in), bias], transB=1)
        else:
            x = b.op("Add", [b.op("MatMul", [x, b.matmul_weight(n_in, n_out)]), bias])
        if layer < len(sizes) - 2:
            x = b.op("Relu", [x])
    b.output(x, "logits")
    return b.model("mlp", [_float_input("x", [1, sizes[0]])], [_float_input("logits", [1, sizes[-1]])])


def small_lstm(seq: int = 16, input_size: int = 32, hidden: int = 64, classes: int = 10,
               seed: int = 0) -> onnx.ModelProto:
    """One ONNX LSTM layer (batch 1) and a linear head on the last hidden state; weights
    uniform in +-1/sqrt(hidden), PyTorch's initialisation."""
    b = GraphBuilder(seed)
    bound = 1.0 / math.sqrt(hidden)
    w = b.uniform(-bound, bound, 1, 4 * hidden, input_size)
    r = b.uniform(-bound, bound, 1, 4 * hidden, hidden)
    bias = b.uniform(-bound, bound, 1, 8 * hidden)
    _, y_h, _ = b.op_multi("LSTM", ["x", w, r, bias], 3, hidden_size=hidden)
    last = b.op("Reshape", [y_h, b.ints(1, hidden)])
    logits = b.op("Gemm", [last, b.he_weight(classes, hidden), b.normal(0.1, classes)], transB=1)
    b.output(logits, "logits")
    return b.model("small_lstm", [_float_input("x", [seq, 1, input_size])],
                   [_float_input("logits", [1, classes])])


def tiny_cnn(channels: tuple[int, ...] = (3, 16, 32, 64), size: int = 32, classes: int = 10,
             seed: int = 0) -> onnx.ModelProto:
    """A CIFAR-sized CNN: Conv 3x3 + ReLU + MaxPool 2x2 stages, then a linear classifier."""
    b = GraphBuilder(seed)
    x = "image"
    for c_in, c_out in itertools.pairwise(channels):
        x = b.op("Conv", [x, b.he_weight(c_out, c_in, 3, 3), b.normal(0.1, c_out)], kernel_shape=[3, 3],
                 pads=[1, 1, 1, 1])
        x = b.op("MaxPool", [b.op("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    side = size >> (len(channels) - 1)
    features = channels[-1] * side * side
    x = b.op("Gemm", [b.op("Flatten", [x], axis=1), b.he_weight(classes, features), b.normal(0.1, classes)],
             transB=1)
    b.output(x, "logits")
    return b.model("tiny_cnn", [_float_input("image", [1, channels[0], size, size])],
                   [_float_input("logits", [1, classes])])


# --- BERT-style encoder -------------------------------------------------------------------------------------

def bert_encoder(seq: int = 128, hidden: int = 256, layers: int = 4, heads: int = 4, ffn: int = 1024,
                 vocab: int = 30522, seed: int = 0) -> onnx.ModelProto:
    """A post-LN BERT encoder, batch 1: token and position embeddings (Gather), attention with
    an additive padding mask, LayerNormalization, a GELU (Erf) FFN, and the Tanh pooler.
    Shapes are static, as an export for a fixed sequence length has them."""
    b = GraphBuilder(seed)
    head_dim = hidden // heads
    tokens = b.op("Gather", [b.normal(1.0, vocab, hidden), "input_ids"], axis=0)
    x = b.op("Add", [tokens, b.normal(0.1, 1, seq, hidden)])
    x = _layer_norm(b, x, hidden)
    padding = b.op("Equal", ["attention_mask", b.const(np.array(0, np.int64))])
    mask = b.op("Where", [b.op("Unsqueeze", [padding, b.ints(1, 2)]), b.const(np.float32(-1e4)),
                          b.const(np.float32(0.0))])
    split_shape, merged_shape = b.ints(1, seq, heads, head_dim), b.ints(1, seq, hidden)

    def linear(t: str, n_in: int, n_out: int) -> str:
        return b.op("Add", [b.op("MatMul", [t, b.matmul_weight(n_in, n_out)]), b.normal(0.02, n_out)])

    def split_heads(t: str, perm: list[int]) -> str:
        return b.op("Transpose", [b.op("Reshape", [t, split_shape])], perm=perm)

    for _ in range(layers):
        q = split_heads(linear(x, hidden, hidden), [0, 2, 1, 3])
        k = split_heads(linear(x, hidden, hidden), [0, 2, 3, 1])
        v = split_heads(linear(x, hidden, hidden), [0, 2, 1, 3])
        scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.float32(math.sqrt(head_dim)))])
        probs = b.op("Softmax", [b.op("Add", [scores, mask])], axis=-1)
        context = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                                   merged_shape])
        x = _layer_norm(b, b.op("Add", [x, linear(context, hidden, hidden)]), hidden)
        x = _layer_norm(b, b.op("Add", [x, linear(_gelu(b, linear(x, hidden, ffn)), ffn, hidden)]), hidden)
    b.output(x, "last_hidden_state")
    first = b.op("Reshape", [b.op("Slice", [x, b.ints(0), b.ints(1), b.ints(1)]), b.ints(1, hidden)])
    pooled = b.op("Tanh", [b.op("Gemm", [first, b.matmul_weight(hidden, hidden), b.normal(0.02, hidden)])])
    b.output(pooled, "pooled")
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, seq]) for n in ("input_ids", "attention_mask")]
    return b.model("bert_encoder", ids, [_float_input("last_hidden_state", [1, seq, hidden]),
                                         _float_input("pooled", [1, hidden])])


def _layer_norm(b: GraphBuilder, x: str, hidden: int) -> str:
    return b.op("LayerNormalization", [x, b.uniform(0.8, 1.2, hidden), b.normal(0.02, hidden)], axis=-1,
                epsilon=1e-12)


def _gelu(b: GraphBuilder, x: str) -> str:
    """GELU as exporters write it before opset 20: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    erf = b.op("Erf", [b.op("Div", [x, b.const(np.float32(math.sqrt(2.0)))])])
    return b.op("Mul", [b.op("Mul", [x, b.const(np.float32(0.5))]), b.op("Add", [erf, b.const(np.float32(1.0))])])


def bert_feed(model: onnx.ModelProto, seed: int = 1) -> Feed:
    """Random token ids; the last eighth of the sequence is padding, so the mask matters."""
    seq = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    graph = model.graph
    table = next(n.input[0] for n in graph.node if n.op_type == "Gather" and n.input[1] == "input_ids")
    vocab = next(i.dims[0] for i in graph.initializer if i.name == table)
    rng = np.random.default_rng(seed)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 8:] = 0
    return {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64), "attention_mask": mask}


# --- YOLO-style detector ------------------------------------------------------------------------------------

def yolo_detector(size: int = 320, width: int = 16, anchors: int = 3, classes: int = 80,
                  seed: int = 0) -> onnx.ModelProto:
    """A YOLOv5-shaped detector: a strided Conv+BatchNorm+SiLU backbone with residual blocks,
    an SPP block (MaxPool 5/9/13 + Concat), an FPN neck (nearest Resize + Concat, LeakyReLU),
    and heads at strides 8, 16 and 32 reshaped to (1, anchors, H*W, 5 + classes) with Sigmoid."""
    b = GraphBuilder(seed)
    w = width
    x = _conv_bn(b, "image", 3, w, 3, 2, "silu")
    features = []
    for c_in, c_out in ((w, 2 * w), (2 * w, 4 * w), (4 * w, 8 * w), (8 * w, 16 * w)):
        x = _residual(b, _conv_bn(b, x, c_in, c_out, 3, 2, "silu"), c_out)
        features.append(x)
    p3, p4, p5 = features[1], features[2], _spp(b, features[3], 16 * w)
    up = _upsample(b, _conv_bn(b, p5, 16 * w, 8 * w, 1, 1, "leaky"))
    n4 = _conv_bn(b, b.op("Concat", [up, p4], axis=1), 16 * w, 8 * w, 3, 1, "leaky")
    up = _upsample(b, _conv_bn(b, n4, 8 * w, 4 * w, 1, 1, "leaky"))
    n3 = _conv_bn(b, b.op("Concat", [up, p3], axis=1), 8 * w, 4 * w, 3, 1, "leaky")
    heads = [_detect(b, t, c, size // stride, anchors, classes)
             for t, c, stride in ((n3, 4 * w, 8), (n4, 8 * w, 16), (p5, 16 * w, 32))]
    b.output(b.op("Concat", heads, axis=2), "detections")
    cells = sum((size // stride) ** 2 for stride in (8, 16, 32))
    return b.model("yolo_detector", [_float_input("image", [1, 3, size, size])],
                   [_float_input("detections", [1, anchors, cells, 5 + classes])])


def _conv_bn(b: GraphBuilder, x: str, c_in: int, c_out: int, kernel: int, stride: int, act: str) -> str:
    """Conv (no bias) + BatchNormalization + SiLU (x * Sigmoid(x)) or LeakyRelu, as exported
    before BatchNorm folding: folding it is the runtime's work, part of what is timed."""
    pad = kernel // 2
    x = b.op("Conv", [x, b.he_weight(c_out, c_in, kernel, kernel)], kernel_shape=[kernel, kernel],
             strides=[stride, stride], pads=[pad] * 4)
    x = b.op("BatchNormalization", [x, b.uniform(0.5, 1.5, c_out), b.normal(0.1, c_out), b.normal(0.1, c_out),
                                    b.uniform(0.5, 1.5, c_out)], epsilon=1e-3)
    if act == "silu":
        return b.op("Mul", [x, b.op("Sigmoid", [x])])
    return b.op("LeakyRelu", [x], alpha=0.1)


def _residual(b: GraphBuilder, x: str, channels: int) -> str:
    """A bottleneck: 1x1 to half the channels, 3x3 back, added to the input."""
    y = _conv_bn(b, x, channels, channels // 2, 1, 1, "silu")
    return b.op("Add", [x, _conv_bn(b, y, channels // 2, channels, 3, 1, "silu")])


def _spp(b: GraphBuilder, x: str, channels: int) -> str:
    """Spatial pyramid pooling: stride-1 max pools of growing windows, concatenated."""
    y = _conv_bn(b, x, channels, channels // 2, 1, 1, "silu")
    pools = [b.op("MaxPool", [y], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4) for k in (5, 9, 13)]
    return _conv_bn(b, b.op("Concat", [y, *pools], axis=1), 2 * channels, channels, 1, 1, "silu")


def _upsample(b: GraphBuilder, x: str) -> str:
    return b.op("Resize", [x, "", b.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")


def _detect(b: GraphBuilder, x: str, channels: int, side: int, anchors: int, classes: int) -> str:
    outputs = anchors * (5 + classes)
    # a small gain keeps the logits near unit scale: saturated sigmoids would hide numeric errors
    y = b.op("Conv", [x, b.he_weight(outputs, channels, 1, 1, gain=0.01), b.normal(0.1, outputs)],
             kernel_shape=[1, 1])
    y = b.op("Reshape", [y, b.ints(1, anchors, 5 + classes, side * side)])
    return b.op("Sigmoid", [b.op("Transpose", [y], perm=[0, 1, 3, 2])])


# --- int8 models, made by onnxruntime's quantization tools ---------------------------------------------------

CALIBRATION_SEEDS = (100, 101, 102, 103)


def ort_quantized(base: BenchModel, mode: str) -> onnx.ModelProto:
    """``base`` as onnxruntime's tools quantize it, with the corpus's settings
    (benchmarks/corpus/quantized.py, whose base models need torch exports): ``static``,
    quantize_static in the QDQ format, int8 activations and per-channel int8 weights, calibrated
    on the base's feeds of a few seeds; ``dynamic``, quantize_dynamic with int8 weights."""
    import tempfile

    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    model = base.build()
    if mode == "static" and _default_opset(model) < 13:
        # (per-channel DequantizeLinear takes an axis from opset 13 on; the light zoo is older)
        model = onnx.version_converter.convert_version(model, 13)
    with tempfile.TemporaryDirectory() as folder:
        source, prepared, target = (os.path.join(folder, f) for f in ("model.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(model, source)
        quant_pre_process(source, prepared, skip_symbolic_shape=True)
        if mode == "dynamic":
            quantize_dynamic(prepared, target, weight_type=QuantType.QInt8)
        else:
            feeds = iter([base.feed(model, seed) for seed in CALIBRATION_SEEDS])

            class Calibration:
                def get_next(self) -> Feed | None:
                    return next(feeds, None)

            quantize_static(prepared, target, Calibration(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
        return onnx.load(target)


def _default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _int8(base: BenchModel, mode: str) -> BenchModel:
    """A registry entry of ``base`` quantized; it is fed as ``base`` is (quantization renames weights)."""
    return BenchModel(f"{base.name}_int8_{mode}", lambda: ort_quantized(base, mode),
                      lambda model, seed=1: base.feed(base.build(), seed))


# --- the registry -------------------------------------------------------------------------------------------

def _light(name: str) -> BenchModel:
    return BenchModel(name, lambda: light_zoo_model(name), random_feed)


MODELS: list[BenchModel] = [
    BenchModel("mlp", mlp, random_feed, quick=True),
    BenchModel("lstm", small_lstm, random_feed, quick=True),
    BenchModel("tiny_cnn", tiny_cnn, random_feed, quick=True),
    BenchModel("bert_encoder", bert_encoder, bert_feed),
    BenchModel("yolo_detector", yolo_detector, random_feed),
    *(_light(name) for name in LIGHT_ZOO),
]
MODELS += [_int8(_light("light_resnet50"), "static"), _int8(_light("light_shufflenet"), "static"),
           _int8(BenchModel("bert_encoder", bert_encoder, bert_feed), "dynamic"),
           _int8(BenchModel("bert_encoder", bert_encoder, bert_feed), "static")]


def select(names: list[str] | None, quick_only: bool = False) -> list[BenchModel]:
    """Registry entries by name (in the order given), or every (quick) model."""
    if names is None:
        return [m for m in MODELS if m.quick or not quick_only]
    by_name = {m.name: m for m in MODELS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]
