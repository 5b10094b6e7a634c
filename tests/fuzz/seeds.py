"""Seed models of the fuzzer: small real models whose mutants reach each part of onnxc.

A CNN, an MLP and a model with If and Loop reach the loader and the common kernels; the
com.microsoft model reaches the contrib ops (Attention, SkipLayerNormalization, FusedMatMul,
BiasGelu, MatMulNBits), the If whose branches give different ranks reaches run-time
specialisation, the random model reaches the seeded generators, and the quantized model the
QLinear kernels. Each is a few kilobytes and compiles in seconds.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

MS = "com.microsoft"


def tiny_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (4, 1, 3, 3)), ("b1", (4,)), ("w2", (3, 16)), ("b2", (3,)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 1, 4, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 3])], inits)
    return _model(graph, 13)


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (6, 8)), ("b1", (8,)), ("w2", (8, 2)))]
    inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "shape"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["a"]),
             helper.make_node("Tanh", ["a"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["l"]),
             helper.make_node("Reshape", ["l", "shape"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 2])], inits)
    return _model(graph, 17)


def control_flow() -> onnx.ModelProto:
    """y = x * 2 if sum(x) > 0 else -x; then a Loop adds 1 to it n times."""
    double = helper.make_graph([helper.make_node("Add", ["x", "x"], ["d"])], "then", [],
                               [helper.make_tensor_value_info("d", T.FLOAT, [3])])
    negate = helper.make_graph([helper.make_node("Neg", ["x"], ["m"])], "else", [],
                               [helper.make_tensor_value_info("m", T.FLOAT, [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Add", ["acc", "one"], ["acc_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
                 helper.make_tensor_value_info("acc", T.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["v"], then_branch=double, else_branch=negate),
             helper.make_node("Loop", ["n", "", "v"], ["y"], body=body)]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero"), numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(3, np.int64), "n")]
    graph = helper.make_graph(nodes, "flow", [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3])], inits)
    return _model(graph, 17)


def contrib_transformer() -> onnx.ModelProto:
    """A transformer block of com.microsoft ops: Attention, SkipLayerNormalization, FusedMatMul,
    BiasGelu, then a MatMulNBits projection with 4-bit weights in blocks of 16."""
    rng = np.random.default_rng(2)
    hidden, out = 16, 4

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [weight("qkv_w", hidden, 3 * hidden), weight("qkv_b", 3 * hidden), weight("gamma", hidden),
             weight("beta", hidden), weight("fc_w", hidden, hidden), weight("fc_b", hidden),
             numpy_helper.from_array(rng.integers(0, 256, (out, 1, 8), dtype=np.uint8), "nbits_w"),
             numpy_helper.from_array(np.full(out, 0.05, np.float32), "nbits_scales")]
    nodes = [helper.make_node("Attention", ["x", "qkv_w", "qkv_b"], ["att"], domain=MS, num_heads=2),
             helper.make_node("SkipLayerNormalization", ["att", "x", "gamma", "beta"], ["norm"], domain=MS,
                              epsilon=1e-5),
             helper.make_node("FusedMatMul", ["norm", "fc_w"], ["fc"], domain=MS, alpha=0.5),
             helper.make_node("BiasGelu", ["fc", "fc_b"], ["act"], domain=MS),
             helper.make_node("MatMulNBits", ["act", "nbits_w", "nbits_scales"], ["y"], domain=MS,
                              K=hidden, N=out, bits=4, block_size=16)]
    graph = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4, hidden])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 4, out])], inits)
    return _model(graph, 17, helper.make_opsetid(MS, 1))


def rank_changing_if() -> onnx.ModelProto:
    """An If on a bool input: a flattened copy of x (rank 1) or x itself (rank 2), then Mul."""
    flat = numpy_helper.from_array(np.array([-1], np.int64), "flat")
    then = helper.make_graph([helper.make_node("Constant", [], ["flat"], value=flat),
                              helper.make_node("Reshape", ["x", "flat"], ["r"])], "then", [],
                             [helper.make_tensor_value_info("r", T.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [],
                              [helper.make_tensor_value_info("same", T.FLOAT, None)])
    nodes = [helper.make_node("If", ["flag"], ["picked"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["picked", "picked"], ["y"])]
    graph = helper.make_graph(nodes, "rank_if", [helper.make_tensor_value_info("x", T.FLOAT, ["a", "b"]),
                                                 helper.make_tensor_value_info("flag", T.BOOL, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])
    return _model(graph, 17)


def random_ops() -> onnx.ModelProto:
    """Seeded generators: RandomNormal, RandomUniformLike, Bernoulli and Multinomial."""
    nodes = [helper.make_node("RandomNormal", [], ["noise"], shape=[2, 3], seed=1.0),
             helper.make_node("Add", ["x", "noise"], ["y"]),
             helper.make_node("RandomUniformLike", ["x"], ["u"], seed=2.0),
             helper.make_node("Bernoulli", ["u"], ["coin"], seed=3.0),
             helper.make_node("Multinomial", ["logits"], ["draws"], sample_size=3, seed=4.0)]
    graph = helper.make_graph(nodes, "random", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                                                helper.make_tensor_value_info("logits", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("coin", T.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("draws", T.INT32, [1, 3])])
    return _model(graph, 17)


def quantized() -> onnx.ModelProto:
    """QuantizeLinear, QLinearConv and QLinearMatMul on uint8, then DequantizeLinear."""
    rng = np.random.default_rng(3)

    def scalar(name: str, value, dtype) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(value, dtype), name)

    inits = [scalar("s", 0.05, np.float32), scalar("z", 128, np.uint8),
             scalar("ws", 0.02, np.float32), scalar("wz", 128, np.uint8),
             scalar("ys", 0.1, np.float32), scalar("yz", 128, np.uint8),
             numpy_helper.from_array(rng.integers(100, 156, (2, 1, 3, 3), dtype=np.uint8), "conv_w"),
             numpy_helper.from_array(rng.integers(100, 156, (4, 3), dtype=np.uint8), "mm_w")]
    nodes = [helper.make_node("QuantizeLinear", ["image", "s", "z"], ["qi"]),
             helper.make_node("QLinearConv", ["qi", "s", "z", "conv_w", "ws", "wz", "ys", "yz"], ["qc"],
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("DequantizeLinear", ["qc", "ys", "yz"], ["conv"]),
             helper.make_node("QuantizeLinear", ["rows", "s", "z"], ["qr"]),
             helper.make_node("QLinearMatMul", ["qr", "s", "z", "mm_w", "ws", "wz", "ys", "yz"], ["qm"]),
             helper.make_node("DequantizeLinear", ["qm", "ys", "yz"], ["mm"])]
    graph = helper.make_graph(nodes, "quantized", [helper.make_tensor_value_info("image", T.FLOAT, ["N", 1, 4, 4]),
                                                   helper.make_tensor_value_info("rows", T.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("conv", T.FLOAT, ["N", 2, 4, 4]),
                               helper.make_tensor_value_info("mm", T.FLOAT, ["N", 3])], inits)
    return _model(graph, 13)


def _model(graph: onnx.GraphProto, opset: int, *extra: onnx.OperatorSetIdProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {
    "tiny_cnn": tiny_cnn, "mlp": mlp, "control_flow": control_flow, "contrib_transformer": contrib_transformer,
    "rank_changing_if": rank_changing_if, "random_ops": random_ops, "quantized": quantized}


def seed_bytes() -> dict[str, bytes]:
    return {name: build().SerializeToString() for name, build in SEEDS.items()}
