"""The channels-blocked layout (compiler/passes/layout.py, compiler/ops/blocked_conv.py and
blocked_pool.py): which convolutions and pools run blocked, that the results are onnxruntime's
at every thread count, batch and SIMD family, and that the IR stays valid and exportable."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from helpers import make_model, run_ort
from onnxc.compiler import frontend
from onnxc.compiler.export import export_model
from onnxc.compiler.passes.pipeline import run_pipeline
from test_isa_matrix import ISAS, _built_for
from tools import is_x86_64


def _conv(nodes, inits, name, x, c_in, c_out, k, stride=1, pads=None, act="Relu", residual=None, seed=0, **attrs):
    rng = np.random.default_rng(seed + len(inits))
    w = (rng.standard_normal((c_out, c_in, k, k)) / np.sqrt(c_in * k * k)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32) * 0.1
    inits += [helper.make_tensor(f"{name}_w", TP.FLOAT, w.shape, w.ravel()),
              helper.make_tensor(f"{name}_b", TP.FLOAT, b.shape, b)]
    if pads is not None:
        attrs["pads"] = pads
    nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], kernel_shape=[k, k],
                                  strides=[stride, stride], **attrs))
    y = f"{name}_c"
    if residual is not None:
        nodes.append(helper.make_node("Add", [y, residual], [f"{name}_sum"]))
        y = f"{name}_sum"
    if act == "Relu":
        nodes.append(helper.make_node("Relu", [y], [name]))
    elif act == "HardSwish":
        nodes.append(helper.make_node("HardSwish", [y], [name]))
    elif act == "LeakyRelu":
        nodes.append(helper.make_node("LeakyRelu", [y], [name], alpha=0.1))
    elif act == "Sigmoid":
        nodes.append(helper.make_node("Sigmoid", [y], [name]))
    else:
        return y
    return name


def resnet_like(batch=1, size=64, count_include_pad=0):
    """A ResNet's shapes in small: a 7x7 stride-2 stem of 3 channels, a max pool, a bottleneck
    with its residual, a stride-2 block with a projection, an average pool, convolutions of 3
    and 1 output blocks (tiles short of 4), 5x5 and asymmetric and SAME padding, fused
    activations, and a global pool in NCHW at the end."""
    nodes, inits = [], []
    x = _conv(nodes, inits, "stem", "x", 3, 32, 7, 2, [3, 3, 3, 3])
    nodes.append(helper.make_node("MaxPool", [x], ["pool1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    a = _conv(nodes, inits, "b1a", "pool1", 32, 16, 1)
    a = _conv(nodes, inits, "b1b", a, 16, 16, 3, pads=[1, 1, 1, 1])
    a = _conv(nodes, inits, "b1c", a, 16, 32, 1, act=None, residual="pool1")
    nodes.append(helper.make_node("Relu", [a], ["b1"]))
    p = _conv(nodes, inits, "b2p", "b1", 32, 64, 1, 2, act=None)
    c = _conv(nodes, inits, "b2a", "b1", 32, 48, 1, 2, act="HardSwish")
    c = _conv(nodes, inits, "b2b", c, 48, 48, 5, pads=[2, 1, 2, 3], act="LeakyRelu")
    c = _conv(nodes, inits, "b2c", c, 48, 64, 3, auto_pad="SAME_UPPER", act="Relu", residual=p)
    nodes.append(helper.make_node("AveragePool", [c], ["pool2"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 0, 0], count_include_pad=count_include_pad))
    d = _conv(nodes, inits, "head", "pool2", 64, 16, 3, pads=[1, 1, 1, 1], act="Sigmoid")
    nodes.append(helper.make_node("GlobalAveragePool", [d], ["y"]))
    model = make_model(nodes, [("x", TP.FLOAT, [batch, 3, size, size])], [("y", TP.FLOAT, [None] * 4)], inits,
                       opset=17)
    feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 3, size, size)).astype(np.float32)}
    return model, feeds


def _ops(model) -> collections.Counter:
    graph = run_pipeline(frontend.build_graph(frontend.load_model(model.SerializeToString())), check=True)
    return collections.Counter(n.op_type for n in graph.nodes)


def _assert_close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))


def test_a_resnets_chain_runs_blocked_from_stem_to_head():
    """Every convolution and pool runs blocked (the stem reads the NCHW image as it is); the
    only reorder is the head's result back to NCHW for the global pool. The IR verifier runs
    after every pass."""
    ops = _ops(resnet_like()[0])
    assert ops["BlockedConv"] == 9 and ops["BlockedPool"] == 2, ops
    assert ops["Conv"] + ops["FusedConv"] + ops["MaxPool"] + ops["AveragePool"] == 0, ops
    assert ops["Transpose"] == 1, ops


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_blocked_results_are_onnxruntimes(threads, batch, count_include_pad):
    model, feeds = resnet_like(batch, 40 if batch == 2 else 64, count_include_pad)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
    session = onnxc.InferenceSession(model.SerializeToString(), so)
    _assert_close(session.run(None, feeds), run_ort(model, feeds))


def test_the_blocked_graph_exports_as_standard_onnx():
    """BlockedConv and BlockedPool go out as reorders around the standard ops: the exported
    model computes the original's results in onnxruntime."""
    model, feeds = resnet_like()
    graph = run_pipeline(frontend.build_graph(frontend.load_model(model.SerializeToString())))
    exported = export_model(graph)
    assert not any(n.domain for n in exported.graph.node)
    _assert_close(run_ort(exported, feeds), run_ort(model, feeds))


@pytest.mark.skipif(not is_x86_64(), reason="the x86 build matrix: this machine is not x86-64")
@pytest.mark.parametrize("isa", ISAS)
def test_each_simd_family_computes_the_blocked_kernels(isa, tmp_path):
    """AVX-512 (4 blocks x 6 positions) and AVX2 (1 block of 2 vectors x 6), each built on
    every machine and run where the CPU can (elsewhere refused at load)."""
    model, feeds = resnet_like(2, 40)
    folder = str(tmp_path / "artifact")
    session = _built_for(isa, model, tmp_path)
    with open(f"{folder}/model.c", encoding="utf-8") as f:
        assert f.read().count("onnxc::BlockedConv") == 9
    if session is not None:
        _assert_close(session.run(None, feeds), run_ort(model, feeds))


def test_the_kernels_c_loops_compute_what_the_simd_ones_do(tmp_path):
    """A portable build runs no blocked pass, but a model naming the blocked ops gets their C
    loops: a stride-2 3x3 convolution of 32 -> 48 channels (tiles of 3 blocks) with a fused
    HardSwish, then a max pool, as the SIMD build computes them."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((48, 32, 3, 3)).astype(np.float32) * 0.1
    b = rng.standard_normal(48).astype(np.float32)
    nodes = [helper.make_node("BlockedConv", ["x", "w", "b"], ["c"], domain="onnxc", kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1], activation="HardSwish",
                              activation_params=[1 / 6, 0.5]),
             helper.make_node("BlockedPool", ["c"], ["y"], domain="onnxc", kernel_shape=[2, 2], strides=[1, 1],
                              pads=[0, 0, 1, 1], mode="max")]
    model = make_model(nodes, [("x", TP.FLOAT, [2, 2, 9, 11, 16])], [("y", TP.FLOAT, [None] * 5)],
                       [helper.make_tensor("w", TP.FLOAT, w.shape, w.ravel()),
                        helper.make_tensor("b", TP.FLOAT, b.shape, b)], opset=17, extra_opsets={"onnxc": 1})
    feeds = {"x": rng.standard_normal((2, 2, 9, 11, 16)).astype(np.float32)}
    onnxc.compile_model(model, str(tmp_path / "portable"), onnxc.CompileOptions(march=""))
    portable = onnxc.InferenceSession(str(tmp_path / "portable")).run(None, feeds)[0]
    simd = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    assert portable.shape == (2, 3, 5, 6, 16)
    np.testing.assert_allclose(portable, simd, rtol=1e-5, atol=1e-5)


def _chain(c: int, size: int, k: int = 1, group: int = 1):
    nodes, inits = [], []
    x = _conv(nodes, inits, "a", "x", c, c, 1)
    x = _conv(nodes, inits, "b", x, c, c, k, pads=[k // 2] * 4, group=group) if group == 1 else x
    if group > 1:
        rng = np.random.default_rng(3)
        w = rng.standard_normal((c, c // group, k, k)).astype(np.float32) * 0.1
        inits.append(helper.make_tensor("g_w", TP.FLOAT, w.shape, w.ravel()))
        nodes.append(helper.make_node("Conv", [x, "g_w"], ["g"], kernel_shape=[k, k], pads=[k // 2] * 4, group=group))
        x = "g"
    x = _conv(nodes, inits, "c", x, c, c, 1)
    return make_model(nodes, [("x", TP.FLOAT, [1, c, size, size])], [(x, TP.FLOAT, [None] * 4)], inits, opset=17)


def test_what_stays_in_nchw():
    """Blocked where it pays: a chain of 1x1, 3x3 and 1x1 convolutions of 96 channels over 16 x 16
    (26M multiply-adds, 528 a value reordered); not a chain of 3M (the small-map NCHW kernels
    win), nor a 3x3 convolution of 96+ channels over 400+ positions (Winograd's) or a grouped
    one: their neighbours, each a chain of its own then, do not pay for their reorders."""
    assert _ops(_chain(96, 16, k=3))["BlockedConv"] == 3
    assert _ops(_chain(32, 32))["BlockedConv"] == 0
    ops = _ops(_chain(96, 24, k=3))
    assert ops["BlockedConv"] == 0 and ops["FusedConv"] == 3, ops
    ops = _ops(_chain(96, 16, k=3, group=4))
    assert ops["BlockedConv"] == 0, ops
    for model, size in ((_chain(96, 16, k=3), 16), (_chain(96, 24, k=3), 24)):
        feeds = {"x": np.random.default_rng(0).standard_normal((1, 96, size, size)).astype(np.float32)}
        _assert_close(onnxc.InferenceSession(model.SerializeToString()).run(None, feeds), run_ort(model, feeds))


def test_disabled_by_name():
    """disabled_optimizers turns the pass off like any other."""
    model, feeds = resnet_like()
    session = onnxc.InferenceSession(model.SerializeToString(), disabled_optimizers=["blocked_conv_layout"])
    with open(f"{session.artifact_dir}/model.c", encoding="utf-8") as f:
        assert "BlockedConv" not in f.read()
    _assert_close(session.run(None, feeds), run_ort(model, feeds))


@pytest.mark.parametrize("op, attrs, message", [
    ("BlockedPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [-5, 0, 0, 0], "mode": "max"}, "pads of at least 0"),
    ("BlockedPool", {"kernel_shape": [3, 3], "strides": [0, 1], "pads": [0, 0, 0, 0], "mode": "max"}, "strides of at least 1"),
    ("BlockedPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [3, 0, 0, 0], "mode": "avg"}, "smaller"),
    ("BlockedPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [0, 0, 0, 0], "mode": "min"}, "mode"),
    ("BlockedConv", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [9, 0, 0, 0]}, "pads of at least 0"),
    ("BlockedConv", {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0]}, "not W's"),
    ("BlockedConv", {"strides": [1, 1], "pads": [0, 0, 0, 0]}, "must be given"),
])
def test_a_models_own_blocked_nodes_are_checked(op, attrs, message):
    """The blocked ops are in onnxc's domain, which a model file may name: their attributes are
    checked like any op's, a clear error before any C is written."""
    model = _internal(op, attrs)
    with pytest.raises(onnxc.ShapeError, match=message):
        onnxc.InferenceSession(model.SerializeToString())


@pytest.mark.parametrize("op", ["BlockedPool", "BlockedConv"])
def test_a_model_of_one_blocked_node_builds_and_runs(op):
    """(Each kernel alone: a helper of the family may not assume the other's code is there.)"""
    attrs = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]} | ({"mode": "avg"} if op == "BlockedPool" else {})
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 8, 16)).astype(np.float32)
    y = onnxc.InferenceSession(_internal(op, attrs).SerializeToString()).run(None, {"x": x})[0]
    assert y.shape == (1, 1, 8, 8, 16) and np.isfinite(y).all()


def _internal(op: str, attrs: dict):
    w = helper.make_tensor("w", TP.FLOAT, [16, 16, 3, 3], np.full(16 * 16 * 9, 0.01, np.float32))
    node = helper.make_node(op, ["x"] + (["w"] if op == "BlockedConv" else []), ["y"], domain="onnxc", **attrs)
    return make_model([node], [("x", TP.FLOAT, [1, 1, 8, 8, 16])], [("y", TP.FLOAT, [None] * 5)],
                      [w] if op == "BlockedConv" else [], opset=17, extra_opsets={"onnxc": 1})


def test_a_portable_build_stays_nchw(tmp_path):
    """Without SIMD (no -march: --portable) the blocked kernels' C loops lose to the NCHW GEMM's
    (open_nsfw 157 against 75 ms): the pass does not run."""
    model, feeds = resnet_like(2, 40)
    folder = str(tmp_path / "artifact")
    onnxc.compile_model(model, folder, onnxc.CompileOptions(march=""))
    with open(f"{folder}/model.c", encoding="utf-8") as f:
        assert "BlockedConv" not in f.read()
    _assert_close(onnxc.InferenceSession(folder).run(None, feeds), run_ort(model, feeds))
