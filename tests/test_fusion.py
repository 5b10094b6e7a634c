"""The fusion passes (compiler/passes/fuse.py) as Before -> Expected IR, and the fused
kernels against onnxruntime at every optimization level and in the exported optimized model."""
from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_onnxc, run_ort
from tools import missing
from onnxc.compiler.frontend import build_graph
from onnxc.compiler.passes.fuse import (fold_batch_norm, fold_conv_scale_shift, fuse_conv_epilogue, fuse_conv_prologue,
                                        fuse_elementwise, fuse_matmul_epilogue, scale_shift_batch_norm)
from onnxc.compiler.passes.infer import infer_shapes
from onnxc.compiler.passes.verify import verify

RNG = np.random.default_rng(3)


def _init(name, *shape, positive=False):
    value = RNG.uniform(0.5, 1.5, shape) if positive else RNG.standard_normal(shape) * 0.3
    return numpy_helper.from_array(value.astype(np.float32), name)


def _bn_inits(c):
    return [_init("gamma", c, positive=True), _init("beta", c), _init("mean", c), _init("var", c, positive=True)]


def residual_block(activation: str = "Relu") -> onnx.ModelProto:
    """conv -> BN -> relu -> conv (+ x) -> activation: a ResNet basic block."""
    act = [helper.make_node(activation, ["sum"], ["y"])]
    if activation == "Swish":  # x * sigmoid(x), as exporters write SiLU
        act = [helper.make_node("Sigmoid", ["sum"], ["sig"]), helper.make_node("Mul", ["sum", "sig"], ["y"])]
    if activation == "Clip":
        act = [helper.make_node("Clip", ["sum", "lo", "hi"], ["y"])]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["b1"], name="bn1"),
             helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "bias2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["c2", "x"], ["sum"], name="add")] + act
    inits = [_init("w1", 8, 8, 3, 3), _init("w2", 8, 8, 3, 3), _init("bias2", 8), *_bn_inits(8),
             numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
             numpy_helper.from_array(np.array(0.7, np.float32), "hi")]
    return make_model(nodes, [("x", T.FLOAT, [2, 8, 10, 10])], [("y", T.FLOAT, [2, 8, 10, 10])], inits, opset=17)


def graph_of(model):
    g = build_graph(model)
    infer_shapes(g)
    verify(g)
    return g


def test_batch_norm_folds_into_the_conv_before_it():
    g = graph_of(residual_block())
    fold_batch_norm(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,8,10,10])
  c1: float[2,8,10,10] = Conv(x, w1_bn, c1_bias_bn)
  r1: float[2,8,10,10] = Relu(c1)
  c2: float[2,8,10,10] = Conv(r1, w2, bias2)
  sum: float[2,8,10,10] = Add(c2, x)
  y: float[2,8,10,10] = Relu(sum)
  return y"""


def test_a_batch_norm_no_conv_takes_becomes_a_scale_and_shift_fused_with_its_relu():
    """DenseNet's Concat -> BN -> ReLU: Mul and Add per channel, then one elementwise loop."""
    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["y"])]
    model = make_model(nodes, [("x", T.FLOAT, [1, 4, 5, 5])], [("y", T.FLOAT, [1, 8, 5, 5])], _bn_inits(8), opset=17)
    g = graph_of(model)
    fold_batch_norm(g)
    scale_shift_batch_norm(g)
    verify(g)
    assert g.dump() == """graph test(x: float[1,4,5,5])
  c: float[1,8,5,5] = Concat(x, x)
  b_scaled: float[1,8,5,5] = Mul(c, bn_scale)
  b: float[1,8,5,5] = Add(b_scaled, bn_shift)
  y: float[1,8,5,5] = Relu(b)
  return y"""
    fuse_elementwise(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Concat", "FusedElementwise"]
    x = RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)
    sess = onnxc.InferenceSession(model.SerializeToString())
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def _scale_shift_model(scale_shape, shift_shape, output_after_mul=False):
    """Conv -> Mul by a constant -> Add of a constant -> Relu (a BatchNormalization written as
    Mul and Add, as Caffe2's exports have it); with output_after_mul, the Mul's result is also
    a graph output."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["scale", "c"], ["m"]), helper.make_node("Add", ["m", "shift"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    inits = [_init("w", 6, 4, 3, 3), _init("scale", *scale_shape, positive=True), _init("shift", *shift_shape)]
    outputs = [("y", T.FLOAT, [1, 6, 7, 7])] + ([("m", T.FLOAT, [1, 6, 7, 7])] if output_after_mul else [])
    return make_model(nodes, [("x", T.FLOAT, [1, 4, 7, 7])], outputs, inits, opset=17)


@pytest.mark.parametrize("scale_shape, shift_shape", [((6, 1, 1), (1, 6, 1, 1)), ((1,), (6, 1, 1))])
def test_a_per_channel_scale_and_shift_after_a_conv_fold_into_it(scale_shape, shift_shape):
    """The Mul and the Add become the Conv's weights and bias, and the Relu its epilogue."""
    model = _scale_shift_model(scale_shape, shift_shape)
    g = graph_of(model)
    fold_conv_scale_shift(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]
    fuse_conv_epilogue(g)
    assert [n.op_type for n in g.nodes] == ["FusedConv"]
    x = RNG.standard_normal((1, 4, 7, 7)).astype(np.float32)
    sess = onnxc.InferenceSession(model.SerializeToString())
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale_shape, output_after_mul", [((1, 1, 7, 7), False), ((6, 1, 1), True)])
def test_a_scale_that_is_not_per_channel_or_an_output_stays(scale_shape, output_after_mul):
    """A Mul that varies over the map does not fold (nor the Add after it, which no longer
    follows a Conv); one whose result is a graph output keeps it, and the Add after it folds
    no further either."""
    model = _scale_shift_model(scale_shape, (6, 1, 1), output_after_mul)
    g = graph_of(model)
    fold_conv_scale_shift(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Mul", "Add", "Relu"]
    x = RNG.standard_normal((1, 4, 7, 7)).astype(np.float32)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for got, want in zip(sess.run(None, {"x": x}), _ort(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_residual_add_and_activation_fuse_into_one_kernel():
    g = graph_of(residual_block())
    fold_batch_norm(g)
    fuse_conv_epilogue(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,8,10,10])
  r1: float[2,8,10,10] = FusedConv(x, w1_bn, c1_bias_bn, _)
  y: float[2,8,10,10] = FusedConv(r1, w2, bias2, x)
  return y"""
    assert [n.attrs["activation"] for n in g.nodes] == ["Relu", "Relu"]


def test_a_two_input_sum_is_a_residual_add():
    """The light zoo's ResNet-50 writes its residual connections as Sum; three inputs are not fused."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Sum", ["x", "c"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"]), helper.make_node("Conv", ["y", "w"], ["c2"]),
             helper.make_node("Sum", ["c2", "x", "y"], ["z"])]
    model = make_model(nodes, [("x", T.FLOAT, [1, 3, 4, 4])], [("z", T.FLOAT, [1, 3, 4, 4])],
                       [_init("w", 3, 3, 1, 1)], opset=17)
    g = graph_of(model)
    fuse_conv_epilogue(g)
    verify(g)
    assert g.dump() == """graph test(x: float[1,3,4,4])
  y: float[1,3,4,4] = FusedConv(x, w, _, x)
  c2: float[1,3,4,4] = Conv(y, w)
  z: float[1,3,4,4] = Sum(c2, x, y)
  return z"""
    x = RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)
    sess = onnxc.InferenceSession(model.SerializeToString())
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_a_conv_output_read_twice_is_not_fused():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["c", "r"], ["y"])]
    g = graph_of(make_model(nodes, [("x", T.FLOAT, [1, 2, 4, 4])], [("y", T.FLOAT, [1, 3, 4, 4])],
                            [_init("w", 3, 2, 1, 1)]))
    before = g.dump()
    fuse_conv_epilogue(g)
    assert g.dump() == before


def _dense_layer(x_shape, steps, *, kernel=1, strides=1, relu_output=False, residual=False):
    """DenseNet's layer: x -> `steps` (Mul or Add of constants of the given shapes, in order) ->
    Relu -> Conv (16 output channels, bias) -> Relu [+ z]; with relu_output the Relu's result is
    also a graph output."""
    c = x_shape[1]
    nodes, cur, inits = [], "x", []
    for i, (op, shape) in enumerate(steps):
        inits.append(_init(f"k{i}", *shape, positive=op == "Mul"))
        nodes.append(helper.make_node(op, [cur, f"k{i}"] if i % 2 == 0 else [f"k{i}", cur], [f"s{i}"], name=f"step{i}"))
        cur = f"s{i}"
    nodes += [helper.make_node("Relu", [cur], ["r"], name="pre_relu"),
              helper.make_node("Conv", ["r", "w", "b"], ["c"], strides=[strides] * 2, pads=[kernel // 2] * 4, name="conv")]
    inits += [_init("w", 16, c, kernel, kernel), _init("b", 16)]
    out = [x_shape[0], 16, *[(d + strides - 1) // strides for d in x_shape[2:]]]
    inputs = [("x", T.FLOAT, x_shape)]
    if residual:
        nodes += [helper.make_node("Add", ["c", "z"], ["cz"]), helper.make_node("Relu", ["cz"], ["y"])]
        inputs.append(("z", T.FLOAT, out))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    outputs = [("y", T.FLOAT, out)] + ([("r", T.FLOAT, x_shape)] if relu_output else [])
    return make_model(nodes, inputs, outputs, inits, opset=17)


@pytest.mark.parametrize("steps, residual", [
    ([("Mul", (24, 1, 1)), ("Add", (24, 1, 1))], False),                 # BatchNormalization as scale and shift
    ([("Mul", (1, 24, 1, 1)), ("Add", (24, 1, 1)), ("Mul", (1,)), ("Add", ())], True),   # then Caffe2's Mul and Add
    ([("Add", (24, 1, 1)), ("Mul", (24, 1, 1))], False),                 # a shift before the scale
    ([], False),                                                          # a ReLU alone
])
def test_a_scale_shift_and_relu_before_a_1x1_conv_are_applied_as_its_gemm_packs_x(steps, residual, tmp_path):
    """DenseNet's BatchNormalization -> ReLU -> 1x1 Conv: the Conv reads the tensor before them
    and its GEMM applies the composed per-channel scale and shift and the ReLU as it packs X
    (a FusedConv with a prologue), so the activated tensor is never stored. Batch 2 and a free
    batch, 1 and 2 threads, against onnxruntime; the optimized model file writes the prologue
    back as Mul, Add and Relu."""
    model = _dense_layer([2, 24, 9, 11], steps, residual=residual)
    g = graph_of(model)
    fuse_conv_epilogue(g)
    fuse_conv_prologue(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["FusedConv"]
    fused = g.nodes[0]
    assert fused.inputs[0].name == "x" and fused.attrs["prologue"] == "Relu"
    assert fused.memo["fused"].startswith(" -> ".join([f"{op} 'step{i}'" for i, (op, _) in enumerate(steps)]
                                                      + ["Relu 'pre_relu'", "Conv 'conv'"]))
    feed = {"x": RNG.standard_normal((2, 24, 9, 11)).astype(np.float32)}
    if residual:
        feed["z"] = RNG.standard_normal((2, 16, 9, 11)).astype(np.float32)
    want = _ort(model, feed)[0]
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
        sess = onnxc.InferenceSession(model.SerializeToString(), so)
        assert [n["op"] for n in sess._model.manifest["nodes"]] == ["FusedConv"]
        np.testing.assert_allclose(sess.run(None, feed)[0], want, rtol=1e-5, atol=1e-5)
    sess, saved = _session_and_optimized_file(model, tmp_path)
    assert [n.op_type for n in saved.graph.node][:3] == ["Mul", "Add", "Relu"]
    np.testing.assert_allclose(_ort(saved, feed)[0], want, rtol=1e-5, atol=1e-5)


def test_a_prologue_takes_a_free_batch():
    """A free batch: any count of images, each one GEMM of its own input."""
    model = _dense_layer(["batch", 32, 5, 7], [("Mul", (32, 1, 1)), ("Add", (32, 1, 1))])
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert [n["op"] for n in sess._model.manifest["nodes"]] == ["FusedConv"]
    for n in (1, 3):
        x = RNG.standard_normal((n, 32, 5, 7)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel, strides, relu_output", [(3, 1, False), (1, 2, False), (1, 1, True)])
def test_a_prologue_is_not_fused_where_the_gemm_does_not_read_x_as_it_is(kernel, strides, relu_output):
    """A 3x3 Conv (its padding is zeros after the ReLU, not ReLU(shift)), a strided one, and a
    ReLU whose result another reader (a graph output) needs keep their loops."""
    model = _dense_layer([1, 24, 8, 8], [("Mul", (24, 1, 1)), ("Add", (24, 1, 1))], kernel=kernel, strides=strides,
                         relu_output=relu_output)
    g = graph_of(model)
    fuse_conv_epilogue(g)
    fuse_conv_prologue(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Mul", "Add", "Relu", "FusedConv"]
    assert g.nodes[-1].input(4) is None
    feed = {"x": RNG.standard_normal((1, 24, 8, 8)).astype(np.float32)}
    sess = onnxc.InferenceSession(model.SerializeToString())
    for got, want in zip(sess.run(None, feed), _ort(model, feed), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _ort(model, feed):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so).run(None, feed)


def side_by_side(models: list) -> onnx.ModelProto:
    """One model that runs ``models`` (each x -> y) side by side on the same x: output i is
    model i's y. Names other than x get a prefix per model. One build then covers what each
    model covers, in a fraction of the compile time."""
    nodes, inits, outputs = [], [], []
    for i, m in enumerate(models):
        def rename(name, i=i):
            return name if name in ("", "x") else f"b{i}_{name}"
        for n in m.graph.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = rename(n.name) if n.name else ""
            copy.input[:] = [rename(v) for v in n.input]
            copy.output[:] = [rename(v) for v in n.output]
            nodes.append(copy)
        for t in m.graph.initializer:
            copy = onnx.TensorProto()
            copy.CopyFrom(t)
            copy.name = rename(t.name)
            inits.append(copy)
        (y,) = m.graph.output
        outputs.append((rename(y.name), y.type.tensor_type.elem_type,
                        [d.dim_value for d in y.type.tensor_type.shape.dim]))
    (x,) = models[0].graph.input
    x_in = ("x", x.type.tensor_type.elem_type, [d.dim_value for d in x.type.tensor_type.shape.dim])
    return make_model(nodes, [x_in], outputs, inits, opset=models[0].opset_import[0].version)


def _matches_onnxruntime_at_every_level(model, x_shape, threads):
    """onnxc's outputs against onnxruntime's (no graph optimizations) at every level, on a
    random x; returns the session of the last level (ALL)."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    want = _ort(model, {"x": x})
    for level in (onnxc.GraphOptimizationLevel.ORT_DISABLE_ALL, onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                  onnxc.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, onnxc.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = onnxc.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = threads
        sess = onnxc.InferenceSession(model.SerializeToString(), so)
        for i, (got, expected) in enumerate(zip(sess.run(None, {"x": x}), want, strict=True)):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"{level}, output {i}")
    return sess


EPILOGUE_ACTIVATIONS = ["Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Clip", "Swish"]


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_blocks_match_onnxruntime_at_every_level(threads):
    """A residual block ending in each activation the conv epilogue applies, side by side in
    one model: each block becomes two FusedConv nodes, and every output matches."""
    model = side_by_side([residual_block(a) for a in EPILOGUE_ACTIVATIONS])
    sess = _matches_onnxruntime_at_every_level(model, (2, 8, 10, 10), threads)
    assert [n["op"] for n in sess._model.manifest["nodes"]] == ["FusedConv"] * (2 * len(EPILOGUE_ACTIVATIONS))


def _special_values_reference(activation: str, s: np.ndarray) -> np.ndarray:
    """Each activation as the epilogue's scalar loops define it (c/helpers/sgemm.c.j2), in
    float64 where it is a function: NaN and the infinities where C's comparisons put them."""
    with np.errstate(all="ignore"):
        hard = lambda v: np.where(v < 0, 0, np.where(v > 1, 1, v))   # noqa: E731
        d = s.astype(np.float64)
        return {"Relu": lambda: np.where(s > 0, s, 0),
                "LeakyRelu": lambda: np.where(s >= 0, s, s * np.float32(0.01)),
                "Clip": lambda: np.where(s < -0.5, -0.5, np.where(s > 0.7, 0.7, s)),
                "HardSigmoid": lambda: hard(0.2 * d + 0.5),
                "HardSwish": lambda: d * hard(d / 6 + 0.5),
                "Sigmoid": lambda: 1 / (1 + np.exp(-d)),
                "Tanh": lambda: np.tanh(d),
                "Swish": lambda: d / (1 + np.exp(-d))}[activation]().astype(np.float32)


def every_epilogue_model() -> onnx.ModelProto:
    """For each activation of EPILOGUE_ACTIVATIONS: y_i = act(conv1x1(x_i; zero weights) + r),
    a FusedConv with a residual whose output is act(r); 16 x 7 x 7, so that the GEMM has full
    tiles, edge rows and a partial column panel."""
    nodes, outputs = [], []
    for i, activation in enumerate(EPILOGUE_ACTIVATIONS):
        s_, y = f"s{i}", f"y{i}"
        nodes += [helper.make_node("Conv", [f"x{i}", "w", "b"], [f"c{i}"]),   # (an input each: nothing to merge)
                  helper.make_node("Add", [f"c{i}", "r"], [s_])]
        nodes += {"Swish": [helper.make_node("Sigmoid", [s_], [f"sig{i}"]), helper.make_node("Mul", [s_, f"sig{i}"], [y])],
                  "Clip": [helper.make_node("Clip", [s_, "lo", "hi"], [y])]}.get(
                      activation, [helper.make_node(activation, [s_], [y])])
        outputs.append((y, T.FLOAT, [1, 16, 7, 7]))
    inits = [numpy_helper.from_array(np.zeros((16, 16, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.zeros(16, np.float32), "b"),
             numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
             numpy_helper.from_array(np.array(0.7, np.float32), "hi")]
    inputs = [(f"x{i}", T.FLOAT, [1, 16, 7, 7]) for i in range(len(EPILOGUE_ACTIVATIONS))]
    return make_model(nodes, inputs + [("r", T.FLOAT, [1, 16, 7, 7])], outputs, inits, opset=17)


def test_the_epilogue_in_the_micro_kernel_keeps_nan_infinities_and_clamps():
    """Each activation sees r itself (every_epilogue_model), with NaN, the infinities, huge
    values and the clamp and threshold points of the exp and tanh approximations in every kind
    of place: full tiles (epilogue in the registers), the edge rows and the last, partial
    column panel (the epilogue's vector and scalar loops)."""
    model = every_epilogue_model()
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 88.7, 89.5, -103.9, -104.5, 3e-4, -3e-4, 4e-4,
                        7.9, -7.95, 3.0, -3.0, 2.5, -2.5, 0.7, -0.5, 0.0], np.float32)
    r = RNG.standard_normal((1, 16, 7, 7)).astype(np.float32) * 4
    flat = r.reshape(-1)
    flat[RNG.choice(flat.size, 3 * special.size, replace=False)] = np.tile(special, 3)
    flat[48::49] = special[:16]   # the last column of every row: the partial panel
    x = RNG.standard_normal((1, 16, 7, 7)).astype(np.float32)
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert [n["op"] for n in sess._model.manifest["nodes"]] == ["FusedConv"] * len(EPILOGUE_ACTIVATIONS)
    feed = {"r": r} | {i.name: x for i in model.graph.input if i.name != "r"}
    for activation, got in zip(EPILOGUE_ACTIVATIONS, sess.run(None, feed), strict=True):
        np.testing.assert_allclose(got, _special_values_reference(activation, r), rtol=2e-6, atol=1e-7,
                                   err_msg=activation)


def _session_and_optimized_file(model, tmp_path):
    """A session at the default level and the optimized model it wrote (checked as ONNX)."""
    so = onnxc.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    saved = onnx.load(so.optimized_model_filepath)
    onnx.checker.check_model(saved)
    return sess, saved


@pytest.mark.parametrize("activation, ops", [("Swish", {"Sigmoid", "Mul"}), ("HardSwish", {"HardSwish"})])
def test_the_optimized_model_file_writes_fused_kernels_as_standard_ops(tmp_path, activation, ops):
    model = residual_block(activation)
    sess, saved = _session_and_optimized_file(model, tmp_path)
    assert {n.op_type for n in saved.graph.node} >= {"Conv", "Add"} | ops
    assert not any(n.op_type == "BatchNormalization" for n in saved.graph.node)  # folded
    x = RNG.standard_normal((2, 8, 10, 10)).astype(np.float32)
    np.testing.assert_allclose(_ort(saved, {"x": x})[0], sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 16, 7, 7, 64, 3), (1, 3, 33, 17, 5, 3), (2, 24, 9, 9, 40, 1), (1, 5, 6, 6, 2, 1)])
def test_packed_weights_with_edge_tiles_and_threads(shape):
    """Output channels and pixels that are not multiples of the micro-kernel tile, 1x1 (direct)
    and 3x3 (im2col) convolutions, one and two threads."""
    n, c, h, w, m, k = shape
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, [("x", T.FLOAT, [n, c, h, w])], [("y", T.FLOAT, [n, m, h, w])],
                       [_init("w", m, c, k, k), _init("b", m)], opset=17)
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    want = _ort(model, {"x": x})[0]
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        got = onnxc.InferenceSession(model.SerializeToString(), so).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_portable_build_uses_the_c_micro_kernel_with_the_same_results(tmp_path):
    """march="" compiles no SIMD family: the portable 4 x 16 tile, weights packed for it."""
    from onnxc.codegen.toolchain import Toolchain
    assert Toolchain(march="").simd() == ""
    model = residual_block("HardSigmoid")
    x = RNG.standard_normal((2, 8, 10, 10)).astype(np.float32)
    want = _ort(model, {"x": x})[0]
    onnxc.compile_model(model.SerializeToString(), tmp_path / "portable", onnxc.CompileOptions(march=""))
    got = onnxc.InferenceSession(str(tmp_path / "portable")).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_avx512_builds_compile_warning_free(tmp_path):
    """The AVX-512 micro-kernel (12 x 32) cannot run on every CI machine, but it must build
    with -Werror wherever gcc can target it."""
    from onnxc.codegen.toolchain import Toolchain
    if Toolchain(march="skylake-avx512").simd() != "avx512f":
        missing("this C compiler cannot target AVX-512")
    manifest = onnxc.compile_model(residual_block("Relu").SerializeToString(), tmp_path / "avx512",
                                   onnxc.CompileOptions(march="skylake-avx512", threads=2))
    assert "-march=skylake-avx512" in manifest["toolchain"]


def transformer_ffn(activation: str = "Relu") -> onnx.ModelProto:
    """x -> MatMul + bias -> GELU written out (Div, Erf, Add, Mul, Mul) -> MatMul + bias
    (a (1, N) constant) + x -> activation: a transformer feed-forward block."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
             helper.make_node("Div", ["hb", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["e1"], name="add1"),
             helper.make_node("Mul", ["hb", "e1"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="half"),
             helper.make_node("MatMul", ["g", "w2"], ["o"], name="mm2"),
             helper.make_node("Add", ["b2", "o"], ["ob"], name="bias2"),
             helper.make_node("Add", ["ob", "x"], ["r"], name="residual"),
             helper.make_node(activation, ["r"], ["y"], name="act")]
    scalars = [numpy_helper.from_array(np.array(v, np.float32), n)
               for n, v in (("sqrt2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    inits = [_init("w1", 16, 32), _init("b1", 32), _init("w2", 32, 16), _init("b2", 1, 16), *scalars]
    return make_model(nodes, [("x", T.FLOAT, [2, 8, 16])], [("y", T.FLOAT, [2, 8, 16])], inits, opset=17)


def test_matmul_bias_residual_and_activation_fuse_and_gelu_becomes_one_loop():
    g = graph_of(transformer_ffn())
    fuse_matmul_epilogue(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,8,16])
  hb: float[2,8,32] = FusedMatMul(x, w1, b1, _)
  d: float[2,8,32] = Div(hb, sqrt2)
  e: float[2,8,32] = Erf(d)
  e1: float[2,8,32] = Add(e, one)
  m: float[2,8,32] = Mul(hb, e1)
  g: float[2,8,32] = Mul(m, half)
  y: float[2,8,16] = FusedMatMul(g, w2, b2_vector, x)
  return y"""
    fuse_elementwise(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,8,16])
  hb: float[2,8,32] = FusedMatMul(x, w1, b1, _)
  g: float[2,8,32] = FusedElementwise(hb, sqrt2, one, half)
  y: float[2,8,16] = FusedMatMul(g, w2, b2_vector, x)
  return y"""
    assert g.nodes[1].attrs["ops"] == "Div, Erf, Add, Mul, Mul"


def scores_then_softmax(elem: int) -> onnx.ModelProto:
    """x W + b -> Softmax -> * half + one, on ``elem`` tensors: an attention head's scores."""
    np_type = helper.tensor_dtype_to_np_dtype(elem)
    inits = [numpy_helper.from_array(a.astype(np_type), n) for a, n in
             ((RNG.standard_normal((16, 32)), "w"), (RNG.standard_normal(32), "b"), (np.array(0.5), "half"),
              (np.array(1.0), "one"))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["s"]), helper.make_node("Add", ["s", "b"], ["sb"]),
             helper.make_node("Softmax", ["sb"], ["p"]), helper.make_node("Mul", ["p", "half"], ["h"]),
             helper.make_node("Add", ["h", "one"], ["y"])]
    return make_model(nodes, [("x", elem, [2, 8, 16])], [("y", elem, [2, 8, 32])], inits, opset=17)


def test_the_fusions_keep_every_16bit_tensor():
    """A fused kernel computes in float32 without the intermediate tensors: float32 graphs fuse, a
    float16 graph keeps every node, so each of its tensors is rounded to float16 where it has one."""
    passes = (fuse_matmul_epilogue, fuse_elementwise)
    g = graph_of(scores_then_softmax(T.FLOAT))
    for fuse in passes:
        fuse(g)
        verify(g)
    assert g.dump() == """graph test(x: float[2,8,16])
  sb: float[2,8,32] = FusedMatMul(x, w, b, _)
  p: float[2,8,32] = Softmax(sb)
  y: float[2,8,32] = FusedElementwise(p, half, one)
  return y"""
    g = graph_of(scores_then_softmax(T.FLOAT16))
    before = g.dump()
    for fuse in passes:
        fuse(g)
        verify(g)
    assert g.dump() == before == """graph test(x: float16[2,8,16])
  s: float16[2,8,32] = MatMul(x, w)
  sb: float16[2,8,32] = Add(s, b)
  p: float16[2,8,32] = Softmax(sb)
  h: float16[2,8,32] = Mul(p, half)
  y: float16[2,8,32] = Add(h, one)
  return y"""


def test_a_value_read_twice_or_by_a_graph_output_stays_materialized():
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Mul", ["a", "a"], ["b"]),
             helper.make_node("Tanh", ["b"], ["c"]), helper.make_node("Sigmoid", ["c"], ["y"])]
    model = make_model(nodes, [("x", T.FLOAT, [3, 4])], [("y", T.FLOAT, [3, 4]), ("c", T.FLOAT, [3, 4])])
    g = graph_of(model)
    fuse_elementwise(g)
    verify(g)
    assert g.dump() == """graph test(x: float[3,4])
  a: float[3,4] = Add(x, x)
  c: float[3,4] = FusedElementwise(a)
  y: float[3,4] = Sigmoid(c)
  return y, c"""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = onnxc.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    for a, b in zip(got, _ort(model, {"x": x})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_matmul_and_elementwise_match_onnxruntime_at_every_level(threads):
    activations = ["Relu", "Sigmoid", "Tanh"]
    sess = _matches_onnxruntime_at_every_level(side_by_side([transformer_ffn(a) for a in activations]),
                                               (2, 8, 16), threads)
    ops = [n["op"] for n in sess._model.manifest["nodes"]]
    assert sorted(ops) == sorted(["FusedMatMul", "FusedElementwise", "FusedMatMul"] * len(activations)), ops


def test_the_optimized_model_file_writes_fused_matmul_and_elementwise_as_standard_ops(tmp_path):
    model = transformer_ffn("Sigmoid")
    sess, saved = _session_and_optimized_file(model, tmp_path)
    assert [n.op_type for n in saved.graph.node] == ["MatMul", "Add", "Identity", "Div", "Erf", "Add", "Mul", "Mul",
                                                     "MatMul", "Add", "Add", "Sigmoid"]
    x = RNG.standard_normal((2, 8, 16)).astype(np.float32)
    np.testing.assert_allclose(_ort(saved, {"x": x})[0], sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_gpt2_gelu_cubes_x_by_products_inside_one_fused_loop():
    """GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 Pow(x, 3)))): Pow by a constant 3
    is x * x * x, as onnxruntime computes it (bit for bit; powf rounds differently), and it joins
    the fused loop of the rest."""
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["p", "c"], ["q"]),
             helper.make_node("Add", ["x", "q"], ["r"]), helper.make_node("Mul", ["r", "s"], ["t"]),
             helper.make_node("Tanh", ["t"], ["u"]), helper.make_node("Add", ["u", "one"], ["v"]),
             helper.make_node("Mul", ["x", "v"], ["w"]), helper.make_node("Mul", ["w", "half"], ["y"]),
             helper.make_node("Pow", ["x", "two"], ["sq"])]
    consts = {"three": 3.0, "two": 2.0, "c": 0.044715, "s": float(np.sqrt(2 / np.pi)), "one": 1.0, "half": 0.5}
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()]
    model = make_model(nodes, [("x", T.FLOAT, [64, 768])], [("y", T.FLOAT, [64, 768]), ("sq", T.FLOAT, [64, 768])],
                       inits, opset=17)
    from onnxc.driver import CompileOptions, generate_source
    source = generate_source(model, CompileOptions()).source
    functions = re.findall(r"\nONNXC_NODE static int (\w+)\([^)]*\)\n\{\n(.*?)\n\}\n", source, re.S)
    assert [name.split("_")[1] for name, _ in functions] == ["FusedElementwise", "Pow"]
    assert not any("pow" in body for _, body in functions)
    x = (RNG.standard_normal((64, 768)) * 3).astype(np.float32)
    got, want = run_onnxc(model, {"x": x}), run_ort(model, {"x": x})
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    cube = onnxc.InferenceSession(make_model([nodes[0]], [("x", T.FLOAT, [64, 768])], [("p", T.FLOAT, [64, 768])],
                                             inits[:1], opset=17).SerializeToString())
    np.testing.assert_array_equal(cube.run(None, {"x": x})[0], x * x * x)


# ---- attention written out: MatMul -> [scale] -> [mask] -> Softmax -> MatMul ------------------

def attention_model(scale_op="Div", mask_shape=None, dims=(2, 3, 20, 33, 16, 24), softmax_output=False,
                    opset=17, nan_fill=False) -> onnx.ModelProto:
    """O = Softmax(Q K [/ or * 8] [+ mask]) V over the last axis; dims (B, H, Sq, Skv, D, Dv),
    strings for symbolic dims; softmax_output: the probabilities are a graph output too;
    nan_fill: Where(IsNaN(P), 0, P) between the softmax and V, as transformers exports write."""
    b, h, sq, skv, d, dv = dims
    nodes, cur, inits = [helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")], "s", []
    if scale_op:
        inits.append(numpy_helper.from_array(np.array(8.0, np.float32), "c"))
        nodes.append(helper.make_node(scale_op, [cur, "c"], ["scaled"]))
        cur = "scaled"
    inputs = [("q", T.FLOAT, [b, h, sq, d]), ("k", T.FLOAT, [b, h, d, skv]), ("v", T.FLOAT, [b, h, skv, dv])]
    if mask_shape is not None:
        inputs.append(("m", T.FLOAT, list(mask_shape)))
        nodes.append(helper.make_node("Add", ["m", cur], ["masked"]))
        cur = "masked"
    nodes.append(helper.make_node("Softmax", [cur], ["p"], axis=-1))
    probs = "p"
    if nan_fill:
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["pz"])]
        probs = "pz"
    nodes.append(helper.make_node("MatMul", [probs, "v"], ["o"]))
    outputs = [("o", T.FLOAT, [b, h, sq, dv])] + ([("p", T.FLOAT, [b, h, sq, skv])] if softmax_output else [])
    return make_model(nodes, inputs, outputs, inits, opset=opset)


def attention_feeds(model, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value or sizes[d.dim_param] for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32) * 2
    if "m" in feeds:   # a padding mask: large negative where masked, some rows entirely
        feeds["m"] = np.where(feeds["m"] > 1.0, np.float32(-1e4), np.float32(0)).astype(np.float32)
    return feeds


def _ops_run(model, feeds, threads):
    options = onnxc.SessionOptions()
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    sess = onnxc.InferenceSession(model.SerializeToString(), options)
    got = sess.run(None, feeds)
    import json
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    return got, {e["args"].get("op_name") for e in events if e.get("cat") == "Node"}


def _assert_fused_attention_matches_onnxruntime(model, feeds, what=""):
    """Fused at 1 and 2 threads, and the same as onnxruntime; the 2-thread outputs."""
    want = run_ort(model, feeds)
    for threads in (1, 2):
        got, ops = _ops_run(model, feeds, threads)
        assert ops == {"FusedAttention"}, ops
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, err_msg=f"{what}{threads} threads")
    return got


@pytest.mark.parametrize("scale_op, mask_shape, dims", [
    ("Div", (2, 1, 1, 33), (2, 3, 20, 33, 16, 24)),       # BERT: a padding mask per batch entry
    ("Mul", (20, 33), (2, 3, 20, 33, 16, 24)),            # one mask for every head
    ("", None, (1, 3, 100, 1000, 64, 64)),                # Whisper: no scale, no mask; blocks of 48 rows, 4 last
    ("", (1, 2, 7, 300), (1, 2, 7, 300, 8, 40)),          # a full mask
    ("Div", None, (1, 1, 13, 5, 3, 1)),                   # fewer entries than threads, odd sizes
])
def test_attention_written_out_is_fused_and_matches_onnxruntime(scale_op, mask_shape, dims):
    model = attention_model(scale_op, mask_shape, dims)
    _assert_fused_attention_matches_onnxruntime(model, attention_feeds(model, {}))


def test_attention_over_a_symbolic_sequence():
    model = attention_model("Div", (1, 1, 1, "S"), (1, 2, "S", "S", 8, 8))
    sess = onnxc.InferenceSession(model.SerializeToString())
    for s in (1, 17, 250):
        feeds = attention_feeds(model, {"S": s})
        np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5,
                                   err_msg=f"sequence {s}")


def test_attention_is_not_fused_where_the_probabilities_are_read_elsewhere():
    model = attention_model("Div", (2, 1, 1, 33), softmax_output=True)
    feeds = attention_feeds(model, {})
    got, ops = _ops_run(model, feeds, 1)
    assert "FusedAttention" not in ops and "Softmax" in ops
    for g, w in zip(got, run_ort(model, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_the_optimized_model_file_writes_the_fused_attention_as_standard_ops(tmp_path):
    model = attention_model("Div", (2, 1, 1, 33))
    sess, saved = _session_and_optimized_file(model, tmp_path)
    assert [n.op_type for n in saved.graph.node if n.op_type != "Constant"] == ["MatMul", "Div", "Add", "Softmax",
                                                                                "MatMul"]
    feeds = attention_feeds(model, {})
    np.testing.assert_allclose(_ort(saved, feeds)[0], sess.run(None, feeds)[0], rtol=1e-5, atol=1e-5)


def test_attention_with_keys_and_values_broadcast_over_batch_axes():
    """K shared by the batch entries, V by the heads (MatMul's broadcasting), and batch axes
    the model leaves symbolic, as an exporter's dynamic batch does."""
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=3),
             helper.make_node("MatMul", ["p", "v"], ["o"])]
    model = make_model(nodes, [("q", T.FLOAT, ["B", 3, 40, 8]), ("k", T.FLOAT, [1, 3, 8, 50]),
                               ("v", T.FLOAT, ["B", 1, 50, 16])], [("o", T.FLOAT, ["B", 3, 40, 16])], [], opset=17)
    rng = np.random.default_rng(9)
    for b in (1, 2):
        feeds = {"q": rng.standard_normal((b, 3, 40, 8)).astype(np.float32),
                 "k": rng.standard_normal((1, 3, 8, 50)).astype(np.float32),
                 "v": rng.standard_normal((b, 1, 50, 16)).astype(np.float32)}
        _assert_fused_attention_matches_onnxruntime(model, feeds, f"batch {b}, ")


def test_attention_with_a_mask_of_its_own_symbols_and_nan_rows_filled():
    """A mask whose dims are symbols of its own (1 or the scores' at run time, checked there),
    rows whose keys are all -inf (NaN probabilities) and Where(IsNaN(P), 0, P) after the
    softmax: fused, the same as onnxruntime, and a mask that does not broadcast is an error."""
    model = attention_model("Div", ("mb", 1, 1, "mk"), (2, 3, 20, 33, 16, 24), nan_fill=True)
    feeds = attention_feeds(model, {"mb": 2, "mk": 33})
    feeds["m"][1, 0, 0, :] = -np.inf   # every key of batch entry 1 masked: NaN rows, then zeros
    got = _assert_fused_attention_matches_onnxruntime(model, feeds)
    assert (got[0][1] == 0).all() and np.isfinite(got[0]).all()
    feeds = attention_feeds(model, {"mb": 1, "mk": 33})   # a mask for every batch entry: broadcast
    np.testing.assert_allclose(_ops_run(model, feeds, 1)[0][0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
    sess = onnxc.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="broadcast|mask|dim"):
        sess.run(None, attention_feeds(model, {"mb": 3, "mk": 33}))


def test_the_optimized_model_file_writes_the_nan_fill_as_standard_ops(tmp_path):
    model = attention_model("Mul", (2, 1, 1, 33), nan_fill=True)
    sess, saved = _session_and_optimized_file(model, tmp_path)
    assert [n.op_type for n in saved.graph.node if n.op_type != "Constant"] == ["MatMul", "Mul", "Add", "Softmax",
                                                                                "IsNaN", "Where", "MatMul"]
    feeds = attention_feeds(model, {})
    feeds["m"][0] = -np.inf
    np.testing.assert_allclose(_ort(saved, feeds)[0], sess.run(None, feeds)[0], rtol=1e-5, atol=1e-5)


def _written_out_hard_swish(kind: str) -> onnx.ModelProto:
    """Conv -> HardSwish as exporters without the op write it."""
    v = "c"
    acts = {
        "paddle": [helper.make_node("Add", [v, "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["k"]),
                   helper.make_node("Mul", [v, "k"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])],
        "divided_first": [helper.make_node("Add", ["three", v], ["a"]),
                          helper.make_node("Clip", ["a", "zero", "six"], ["k"]),
                          helper.make_node("Mul", ["k", "sixth"], ["d"]), helper.make_node("Mul", ["d", v], ["y"])],
        "hard_sigmoid": [helper.make_node("HardSigmoid", [v], ["s"], alpha=1 / 6, beta=0.5),
                         helper.make_node("Mul", [v, "s"], ["y"])],
        "divided_by_3": [helper.make_node("Add", [v, "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["k"]),
                         helper.make_node("Mul", [v, "k"], ["m"]), helper.make_node("Div", ["m", "three"], ["y"])],
        "clipped_at_5": [helper.make_node("Add", [v, "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "three"], ["k"]),
                         helper.make_node("Mul", [v, "k"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])],
    }[kind]
    consts = [numpy_helper.from_array(np.array(value, np.float32), name)
              for name, value in (("three", 3.0), ("zero", 0.0), ("six", 6.0), ("sixth", 1 / 6))]
    used = {i for n in acts for i in n.input}
    return make_model([helper.make_node("Conv", ["x", "w", "b"], [v], pads=[1, 1, 1, 1])] + acts,
                      [("x", T.FLOAT, [1, 4, 9, 9])], [("y", T.FLOAT, [1, 8, 9, 9])],
                      [_init("w", 8, 4, 3, 3), _init("b", 8)] + [c for c in consts if c.name in used], opset=17)


@pytest.mark.parametrize("kind, fused", [("paddle", True), ("divided_first", True), ("hard_sigmoid", True),
                                         ("divided_by_3", False), ("clipped_at_5", False)])
def test_hard_swish_written_out_is_the_conv_epilogue(kind, fused):
    """x * Clip(x + 3, 0, 6) / 6 (PaddlePaddle's export: PP-OCR, PP-LCNet) and x * HardSigmoid(x)
    (tf2onnx) are HardSwish: the conv's epilogue computes it; other constants are not."""
    model = _written_out_hard_swish(kind)
    g = graph_of(model)
    fuse_conv_epilogue(g)
    verify(g)
    if fused:
        assert [(n.op_type, n.attrs["activation"]) for n in g.nodes] == [("FusedConv", "HardSwish")]
    else:
        assert [n.op_type for n in g.nodes] == [n.op_type for n in model.graph.node]
    feed = {"x": (RNG.standard_normal((1, 4, 9, 9)) * 3).astype(np.float32)}
    np.testing.assert_allclose(run_onnxc(model, feed)[0], run_ort(model, feed)[0], rtol=1e-5, atol=1e-5)
