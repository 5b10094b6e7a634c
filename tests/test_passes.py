"""Each pass as Before -> Expected IR (Graph.dump), with the verifier after every pass."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model
from onnxc.compiler.frontend import build_graph
from onnxc.compiler.passes.infer import fold_constants, infer_shapes
from onnxc.compiler.passes.pipeline import PIPELINE, TARGETS, run_pipeline
from onnxc.compiler.passes.simplify import eliminate_dead_code, remove_identity_like
from onnxc.compiler.passes.verify import verify


def graph_of(nodes, inputs, outputs, inits=(), opset=17):
    g = build_graph(make_model(nodes, inputs, outputs, inits, opset=opset))
    infer_shapes(g)
    verify(g)
    return g


def test_pipeline_is_an_ordered_list_of_named_passes():
    names = [name for name, _, _ in PIPELINE]
    assert names[0] == "infer_shapes"
    assert names.index("fold_constants") < names.index("remove_identity_like") < names.index("eliminate_dead_code")


def test_remove_identity_like():
    g = graph_of([helper.make_node("Identity", ["x"], ["a"]),
                  helper.make_node("Relu", ["a"], ["b"]),
                  helper.make_node("Dropout", ["b"], ["c"]),
                  helper.make_node("Relu", ["c"], ["y"])],
                 [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [2, 3])])
    assert g.dump() == """graph test(x: float[2,3])
  a: float[2,3] = Identity(x)
  b: float[2,3] = Relu(a)
  c: float[2,3] = Dropout(b)
  y: float[2,3] = Relu(c)
  return y"""
    remove_identity_like(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,3])
  b: float[2,3] = Relu(x)
  y: float[2,3] = Relu(b)
  return y"""


def test_noop_reshape_and_cast_are_removed_but_real_ones_stay():
    shape_same = onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "same")
    shape_new = onnx.numpy_helper.from_array(np.array([3, 2], np.int64), "new")
    g = graph_of([helper.make_node("Reshape", ["x", "same"], ["a"]),
                  helper.make_node("Cast", ["a"], ["b"], to=T.FLOAT),
                  helper.make_node("Reshape", ["b", "new"], ["y"])],
                 [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [3, 2])], [shape_same, shape_new])
    remove_identity_like(g)
    eliminate_dead_code(g)
    verify(g)
    assert g.dump() == """graph test(x: float[2,3])
  y: float[3,2] = Reshape(x, new)
  return y"""


def test_identity_feeding_graph_output_keeps_output_name():
    g = graph_of([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])],
                 [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])])
    remove_identity_like(g)
    verify(g)
    assert g.output_names == ["y"]
    assert [n.op_type for n in g.nodes] == ["Relu"]


def test_dead_code_elimination():
    g = graph_of([helper.make_node("Relu", ["x"], ["unused"]),
                  helper.make_node("Relu", ["unused"], ["unused2"]),
                  helper.make_node("Add", ["x", "x"], ["y"])],
                 [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])])
    eliminate_dead_code(g)
    verify(g)
    assert g.dump() == """graph test(x: float[4])
  y: float[4] = Add(x, x)
  return y"""


def test_constant_folding_turns_shape_arithmetic_into_constants():
    two = onnx.numpy_helper.from_array(np.array([2.0, 2.0, 2.0], np.float32), "two")
    shape = onnx.numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    g = graph_of([helper.make_node("Add", ["two", "two"], ["four"]),
                  helper.make_node("Reshape", ["x", "shape"], ["r"]),
                  helper.make_node("Add", ["r", "r"], ["y"]),
                  helper.make_node("Add", ["four", "four"], ["eight"])],
                 [("x", T.FLOAT, [6])], [("y", T.FLOAT, [3, 2]), ("eight", T.FLOAT, [3])], [two, shape])
    fold_constants(g)
    eliminate_dead_code(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Reshape", "Add"]
    eight = g.outputs[1]
    np.testing.assert_array_equal(eight.const, np.full(3, 8.0, np.float32))


def test_shape_data_is_propagated_during_inference():
    # Like onnx's data propagation: Shape of a static value and small int math are evaluated
    # by inference itself, so Reshape gets a static shape even with folding disabled.
    g = graph_of([helper.make_node("Shape", ["x"], ["s"]),
                  helper.make_node("Reshape", ["y_in", "s"], ["y"])],
                 [("x", T.FLOAT, [2, 3]), ("y_in", T.FLOAT, [6])], [("y", T.FLOAT, [2, 3])])
    assert [n.op_type for n in g.nodes] == ["Reshape"]
    assert g.nodes[0].outputs[0].shape == (2, 3)


def test_shape_of_symbolic_tensor_keeps_dims_symbolic():
    # Reshape(x, Concat(Shape(x)[0], [-1])) on x: (batch, 3, 4) gives (batch, 12), not run-time dims
    g = graph_of([helper.make_node("Shape", ["x"], ["s"], end=1),
                  helper.make_node("Cast", ["s"], ["s64"], to=T.INT64),
                  helper.make_node("ConstantOfShape", ["s64"], ["ones"]),
                  helper.make_node("Reshape", ["x", "s64"], ["flat"]),
                  helper.make_node("Add", ["flat", "ones"], ["y"])],
                 [("x", T.FLOAT, ["batch"])], [("y", T.FLOAT, ["batch"])])
    fold_constants(g)
    verify(g)
    assert g.outputs[0].shape == ("batch",)
    assert g.nodes[0].outputs[0].sym_value == ("batch",)


def test_symbolic_dims_flow_through_inference():
    g = graph_of([helper.make_node("Add", ["x", "b"], ["y"])],
                 [("x", T.FLOAT, ["batch", 1]), ("b", T.FLOAT, [1, 8])], [("y", T.FLOAT, ["batch", 8])])
    assert g.outputs[0].shape == ("batch", 8)


def test_full_pipeline_with_verifier_after_each_pass():
    seen = []
    g = build_graph(make_model([helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
                               [("x", T.FLOAT, ["n"])], [("y", T.FLOAT, ["n"])]))
    run_pipeline(g, check=True, trace=lambda name, _: seen.append(name))
    assert seen == [name for name, _, _ in PIPELINE if "native" in TARGETS.get(name, ("native",))]
    assert [n.op_type for n in g.nodes] == ["Relu"]
    seen.clear()
    run_pipeline(g, check=True, trace=lambda name, _: seen.append(name), target="c")
    assert seen == [name for name, _, _ in PIPELINE if "c" in TARGETS.get(name, ("c",))]
    assert "fuse_attention" not in seen and "fuse_qdq" in seen


def test_common_subexpressions_are_computed_once():
    """Two Transposes of x with the same perm and two Relus of them: one of each is left;
    graph outputs keep their names, and a different perm is not merged."""
    from onnxc.compiler.passes.simplify import eliminate_common_subexpressions
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
             helper.make_node("Transpose", ["x"], ["t2"], perm=[1, 0]),
             helper.make_node("Transpose", ["x"], ["t3"], perm=[0, 1]),
             helper.make_node("Relu", ["t1"], ["y1"]), helper.make_node("Relu", ["t2"], ["y2"]),
             helper.make_node("Neg", ["t3"], ["d"])]
    model = make_model(nodes, [("x", T.FLOAT, [2, 3])],
                       [("y1", T.FLOAT, [3, 2]), ("y2", T.FLOAT, [3, 2]), ("d", T.FLOAT, [2, 3])])
    g = build_graph(model)
    infer_shapes(g)
    eliminate_common_subexpressions(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == ["Transpose", "Transpose", "Relu", "Neg"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert [o.name for o in sess.get_outputs()] == ["y1", "y2", "d"]
    y1, y2, d = sess.run(None, {"x": x})
    np.testing.assert_array_equal(d, -x)
    np.testing.assert_array_equal(y1, np.maximum(x.T, 0))
    np.testing.assert_array_equal(y2, y1)


def _dilated_conv(dilation: int, size: int = 33, stride: int = 1, pad=None):
    """A 3x3 Conv of 3 to 4 channels; pad: one for every side or (top, left, bottom, right)."""
    rng = np.random.default_rng(dilation)
    pads = [dilation if pad is None else pad] * 4 if not isinstance(pad, tuple) else list(pad)
    w = onnx.numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    out = (size + pads[0] + pads[2] - 2 * dilation - 1) // stride + 1
    return make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], dilations=[dilation] * 2,
                                        pads=pads, strides=[stride] * 2)],
                      [("x", T.FLOAT, [1, 3, size, size])], [("y", T.FLOAT, [1, 4, out, out])], [w, b], opset=17)


def test_trim_padding_taps_makes_a_widely_dilated_conv_a_1x1_one():
    """Before: a 3x3 Conv dilated by 36 over a 33x33 map (its outer taps land in the padding at
    every output position). Expected: the center tap as a 1x1 Conv without pads or dilation."""
    from onnxc.compiler.passes.padding import trim_padding_taps
    g = build_graph(_dilated_conv(36))
    infer_shapes(g)
    trim_padding_taps(g)
    verify(g)
    conv = g.nodes[0]
    assert conv.inputs[1].const.shape == (4, 3, 1, 1)
    assert conv.attrs["pads"] == [0, 0, 0, 0] and conv.attrs["dilations"] == [1, 1]
    assert conv.attrs["kernel_shape"] == [1, 1]
    w = onnx.numpy_helper.to_array(_dilated_conv(36).graph.initializer[0])
    np.testing.assert_array_equal(conv.inputs[1].const, w[:, :, 1:2, 1:2])


def test_trim_padding_taps_keeps_taps_some_output_reads():
    """Dilation 24 over 33: the outer taps read inside for some rows (kept); 12: every tap."""
    from onnxc.compiler.passes.padding import trim_padding_taps
    for dilation in (12, 24):
        g = build_graph(_dilated_conv(dilation))
        infer_shapes(g)
        before = g.dump()
        trim_padding_taps(g)
        assert g.dump() == before


def test_convolutions_with_trimmed_taps_match_onnxruntime():
    """Whole taps dropped on both sides or one (the last case keeps two taps of three), with
    strides and pads that are not the dilation, against onnxruntime."""
    from helpers import assert_matches_ort
    rng = np.random.default_rng(0)
    for dilation, size, stride, pad in ((36, 33, 1, 36), (24, 33, 1, 24), (20, 17, 1, 20), (20, 17, 2, 25),
                                        (9, 7, 1, 9), (6, 12, 3, 10), (8, 10, 1, (8, 8, 0, 0))):
        model = _dilated_conv(dilation, size, stride, pad)
        assert_matches_ort(model, {"x": rng.standard_normal((1, 3, size, size)).astype(np.float32)})


def _aspp_conv(dilation: int, channels: int = 64, size: int = 33):
    rng = np.random.default_rng(dilation)
    w = onnx.numpy_helper.from_array((rng.standard_normal((32, channels, 3, 3)) / 24).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    return make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], dilations=[dilation] * 2,
                                        pads=[dilation] * 4),
                       helper.make_node("Relu", ["c"], ["y"])],
                      [("x", T.FLOAT, ["n", channels, size, size])], [("y", T.FLOAT, ["n", 32, size, size])], [w, b],
                      opset=17)


def test_split_padding_regions_cuts_a_dilated_conv_into_rectangles_without_padding():
    """Before: a 3x3 Conv dilated by 12 over 33x33 (ASPP). Expected: 3 x 3 rectangles of
    outputs, each a Conv without pads of a Slice of the input by the taps it reads (two, three
    or two kernel rows and columns; the middle one reads all of the input, not a copy),
    joined by Concat along the width, then the height."""
    from onnxc.compiler.passes.padding import split_padding_regions
    g = build_graph(_aspp_conv(12))
    infer_shapes(g)
    split_padding_regions(g)
    verify(g)
    ops = [n.op_type for n in g.nodes]
    assert ops.count("Slice") == 8 and ops.count("Conv") == 9 and ops.count("Concat") == 4 and ops[-1] == "Relu"
    convs = [n for n in g.nodes if n.op_type == "Conv"]
    assert [tuple(c.attrs["kernel_shape"]) for c in convs[:3]] == [(2, 2), (2, 3), (2, 2)]
    assert all(c.attrs["pads"] == [0, 0, 0, 0] for c in convs)
    assert [tuple(c.inputs[0].shape[2:]) for c in convs[:3]] == [(24, 24), (24, 33), (24, 24)]
    assert g.nodes[-2].outputs[0] is g.nodes[-1].inputs[0] and g.nodes[-2].attrs == {"axis": 2}


def test_a_region_that_reads_all_of_the_input_reads_it_without_a_copy():
    """Dilation 24 over 33x33: the four corner rectangles (2x2 taps) read every row and column
    of X; their Convs read X itself, and only the other rectangles copy theirs out."""
    from onnxc.compiler.passes.padding import split_padding_regions
    g = build_graph(_aspp_conv(24))
    infer_shapes(g)
    x = g.inputs[0]
    split_padding_regions(g)
    verify(g)
    convs = [n for n in g.nodes if n.op_type == "Conv"]
    slices = [n for n in g.nodes if n.op_type == "Slice"]
    assert len(convs) == 9 and sum(c.inputs[0] is x for c in convs) == 4 and len(slices) == 5
    assert all(s.outputs[0].shape != x.shape for s in slices)


def test_split_padding_regions_leaves_ordinary_padding_alone():
    """A 3x3 Conv with pads of 1 (or dilation 2 with pads of 2) reads padding on its border rows
    only: under a quarter of its products, not worth the copies."""
    from onnxc.compiler.passes.padding import split_padding_regions
    for dilation in (1, 2):
        g = build_graph(_aspp_conv(dilation, size=56))
        infer_shapes(g)
        before = g.dump()
        split_padding_regions(g)
        assert g.dump() == before


def test_split_padding_regions_leaves_small_maps_whose_regions_would_reread_the_weights():
    """A 3x3 Conv with pads of 1 on a 4x4 map multiplies padding with 31% of its products, but
    its 9 regions would read the weights' taps 49 times where the whole Conv reads 9: left
    whole. A dilated one on a small map (12x12, dilation 6: every output reads two of the
    three kernel rows and columns, 56% of the products are padding's; 4 regions of 2x2 taps
    read 16) is still split."""
    from onnxc.compiler.passes.padding import split_padding_regions
    for dilation, size, split in ((1, 4, False), (6, 12, True)):
        g = build_graph(_aspp_conv(dilation, channels=512, size=size))
        infer_shapes(g)
        before = g.dump()
        split_padding_regions(g)
        assert (g.dump() != before) == split, (dilation, size)


def test_convolutions_split_into_regions_match_onnxruntime_and_the_whole_conv():
    from helpers import assert_matches_ort
    rng = np.random.default_rng(1)
    for dilation in (6, 12, 24):
        model = _aspp_conv(dilation)
        x = {"x": rng.standard_normal((1, 64, 33, 33)).astype(np.float32)}
        assert_matches_ort(model, x)
        whole = onnxc.InferenceSession(model.SerializeToString(), disabled_optimizers=["split_padding_regions"])
        split = onnxc.InferenceSession(model.SerializeToString())
        np.testing.assert_allclose(split.run(None, x)[0], whole.run(None, x)[0], rtol=1e-5, atol=1e-5)


def test_a_large_transpose_of_a_constant_is_folded_only_where_products_pack_it(monkeypatch):
    """A transposed constant above the folding limit is folded where only MatMul / Gemm read it
    as B (they pack it when compiling: no weights added; a language model's head tied to its
    embedding), and left to run where anything else reads it (folding would add its copy)."""
    from onnxc.compiler.passes import infer
    monkeypatch.setattr(infer, "FOLD_MAX_ELEMENTS", 16)
    rng = np.random.default_rng(0)
    emb = onnx.numpy_helper.from_array(rng.standard_normal((10, 6)).astype(np.float32), "emb")
    nodes = [helper.make_node("Transpose", ["emb"], ["head"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "head"], ["logits"]),
             helper.make_node("Gemm", ["x", "head"], ["y"])]
    g = graph_of(nodes, [("x", T.FLOAT, [3, 6])], [("logits", T.FLOAT, [3, 10]), ("y", T.FLOAT, [3, 10])], [emb])
    fold_constants(g)
    assert [n.op_type for n in g.nodes] == ["MatMul", "Gemm"]
    assert np.array_equal(g.nodes[0].inputs[1].const, onnx.numpy_helper.to_array(emb).T)
    # read as A, or by another op: the Transpose stays
    for reader in (helper.make_node("MatMul", ["head", "z"], ["y"]), helper.make_node("Relu", ["head"], ["y"])):
        shape = [10, 6] if reader.op_type == "MatMul" else [6, 10]
        g = graph_of([nodes[0], reader], [("z", T.FLOAT, [10, 2])], [("y", T.FLOAT, [6, 2] if reader.op_type == "MatMul" else shape)], [emb])
        fold_constants(g)
        assert [n.op_type for n in g.nodes] == ["Transpose", reader.op_type]


@pytest.mark.parametrize("opset, axes, keepdims, pooled", [
    (18, [2, 3], 1, True), (18, [-1, -2], 1, True), (13, [2, 3], 1, True), (18, [2, 3], 0, False),
    (18, [1, 2, 3], 1, False), (18, [3], 1, False)])
def test_reduce_mean_over_the_spatial_axes_is_global_average_pool(opset, axes, keepdims, pooled):
    """The dynamo exporter's squeeze-and-excitation: ReduceMean over every axis past the second,
    dims kept, becomes GlobalAveragePool (others stay) and gives onnxruntime's result."""
    from onnxc.compiler.passes.simplify import global_pool_from_reduce_mean
    from helpers import run_onnxc, run_ort
    if opset >= 18:
        node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=keepdims)
        inits = [numpy_helper.from_array(np.array(axes, np.int64), "axes")]
    else:
        node, inits = helper.make_node("ReduceMean", ["x"], ["y"], axes=axes, keepdims=keepdims), []
    rank = 4 if keepdims else 4 - len(axes)
    model = make_model([node], [("x", T.FLOAT, [2, 5, 6, 7])], [("y", T.FLOAT, [None] * rank)], inits, opset=opset)
    g = build_graph(model)
    infer_shapes(g)
    global_pool_from_reduce_mean(g)
    verify(g)
    assert [n.op_type for n in g.nodes] == (["GlobalAveragePool"] if pooled else ["ReduceMean"])
    feed = {"x": np.random.default_rng(1).standard_normal((2, 5, 6, 7)).astype(np.float32)}
    np.testing.assert_allclose(run_onnxc(model, feed)[0], run_ort(model, feed)[0], rtol=1e-5, atol=1e-6)
