"""Reductions (Reduce*, ArgMax/ArgMin), CumSum/CumProd and TopK against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model, run_onnxc, run_ort

RNG = np.random.default_rng(0)
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSumExp", "ReduceSumSquare"]


def elem(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def const(name: str, values, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def reduce_model(ops, x_shape, dtype, axes, keepdims, opset=18, runtime_axes=False, **attrs):
    """One node per op, all reducing input X over the same axes (None: no axes input)."""
    inputs = [("X", elem(dtype), x_shape)]
    inits = []
    if axes is not None:
        if runtime_axes:
            inputs.append(("axes", TP.INT64, [len(axes)]))
        else:
            inits.append(const("axes", axes))
    node_inputs = ["X"] + (["axes"] if axes is not None else [])
    nodes = [helper.make_node(op, node_inputs, [f"Y{i}"], keepdims=keepdims, **attrs) for i, op in enumerate(ops)]
    rank = len(x_shape) if keepdims or not axes else len(x_shape) - len(axes)
    outputs = [(f"Y{i}", elem(dtype), [None] * rank) for i in range(len(ops))]
    return with_inferred_shapes(make_model(nodes, inputs, outputs, inits, opset=opset))


def with_inferred_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give graph outputs the shapes onnx shape inference finds (outputs without any get rank 0)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for out in model.graph.output:
        v = known.get(out.name)
        if v is not None and v.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.CopyFrom(v.type.tensor_type.shape)
        elif not out.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.SetInParent()
    return model


def assert_matches_reference(model, feeds, rtol=1e-5, atol=1e-6):
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = run_onnxc(model, feeds)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


# ---- Reduce* ----------------------------------------------------------------------

@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), ([-1], 0), ([], 1), (None, 0)])
def test_reduce_ops_constant_axes(axes, keepdims):
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    model = reduce_model(REDUCE_OPS + ["ReduceLogSum"], [2, 3, 4], np.float32, axes, keepdims)
    assert_matches_ort(model, {"X": x})


def test_reduce_attribute_axes():
    """Opsets before the axes input: axes is an attribute (ReduceSum until 12, the others until 17)."""
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("ReduceSum", ["X"], ["Y0"], axes=[0, 2], keepdims=0),
             helper.make_node("ReduceMax", ["X"], ["Y1"], axes=[-1]),
             helper.make_node("ReduceMean", ["X"], ["Y2"], keepdims=0),
             helper.make_node("ReduceL2", ["X"], ["Y3"], axes=[1])]
    model = with_inferred_shapes(make_model(nodes, [("X", TP.FLOAT, [3, 4, 5])],
                                           [(f"Y{i}", TP.FLOAT, None) for i in range(4)], opset=11))
    assert_matches_ort(model, {"X": x})


@pytest.mark.parametrize("dtype,axes", [(np.int32, [1]), (np.int32, [-1]), (np.int64, [0, 2]), (np.float64, [2]),
                                        (np.float16, [1]), (np.float16, [0, 2])])
def test_reduce_dtypes(dtype, axes):
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare"]
    x = RNG.integers(-5, 6, (3, 4, 2)).astype(dtype)
    model = reduce_model(ops, [3, 4, 2], dtype, axes, 1)
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    assert_matches_ort(model, {"X": x}, rtol=rtol, atol=rtol)


def test_reduce_bfloat16():
    """bfloat16 accumulates in float; onnxruntime lacks these kernels, so compare with numpy."""
    import ml_dtypes
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(ml_dtypes.bfloat16)
    model = reduce_model(["ReduceSum", "ReduceMax", "ReduceL2", "ReduceLogSumExp"], [3, 4, 5], x.dtype, [0, 2], 0)
    wide = x.astype(np.float64)
    expected = [wide.sum((0, 2)), wide.max((0, 2)), np.sqrt((wide * wide).sum((0, 2))),
                np.log(np.exp(wide).sum((0, 2)))]
    for a, e in zip(run_onnxc(model, {"X": x}), expected):
        assert a.dtype == x.dtype
        np.testing.assert_allclose(a.astype(np.float64), e, rtol=1e-2)


def test_reduce_integer_wraparound():
    """Integer sums and products wrap around (modulo 2^32) instead of overflowing."""
    x = np.array([[2**30, 2**30, 2**30], [-(2**31), -1, 3]], dtype=np.int32)
    model = reduce_model(["ReduceSum", "ReduceProd", "ReduceSumSquare"], [2, 3], np.int32, [1], 0)
    wide = x.astype(np.int64)
    expected = [wide.sum(1), wide.prod(1), (wide * wide).sum(1)]
    for a, e in zip(run_onnxc(model, {"X": x}), expected):
        np.testing.assert_array_equal(a, e.astype(np.int32))


def test_reduce_max_min_small_types():
    x_bool = RNG.integers(0, 2, (3, 4)).astype(np.bool_)
    x_i8 = RNG.integers(-128, 128, (3, 4)).astype(np.int8)
    for x in (x_bool, x_i8):
        model = reduce_model(["ReduceMax", "ReduceMin"], [3, 4], x.dtype, [0], 0, opset=20)
        assert_matches_ort(model, {"X": x})


def test_reduce_empty_sets():
    """Reducing zero elements gives the op's identity (-inf for max, 0 for sum, 1 for prod...)."""
    x = np.zeros((2, 0, 3), dtype=np.float32)
    ops = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
           "ReduceLogSumExp", "ReduceSumSquare"]
    model = reduce_model(ops, [2, 0, 3], np.float32, [1], 1)
    assert_matches_reference(model, {"X": x})


def test_reduce_noop_with_empty_axes():
    """noop_with_empty_axes: empty axes reduce over nothing (each output sees one element)."""
    x = RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)
    ops = ["ReduceSum", "ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
    model = reduce_model(ops, [2, 3], np.float32, [], 1, noop_with_empty_axes=1)
    assert_matches_ort(model, {"X": x})


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_runtime_axes(keepdims):
    """Axes fed at run time: output dims are computed from the axes values."""
    model = reduce_model(["ReduceSum", "ReduceMax", "ReduceMean", "ReduceLogSumExp"], ["N", 3, 4], np.float32,
                         [0], keepdims, runtime_axes=True)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n, axes in ((2, [1]), (5, [-1]), (3, [0])):
        feeds = {"X": RNG.standard_normal((n, 3, 4)).astype(np.float32), "axes": np.array(axes, np.int64)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_reduce_runtime_axes_errors():
    model = reduce_model(["ReduceSum"], [2, 3], np.float32, [0, 0], 1, runtime_axes=True)
    sess = onnxc.InferenceSession(model.SerializeToString())
    x = np.ones((2, 3), np.float32)
    with pytest.raises(onnxc.RuntimeFailure, match="out of range"):
        sess.run(None, {"X": x, "axes": np.array([0, 2], np.int64)})
    with pytest.raises(onnxc.RuntimeFailure, match="twice"):
        sess.run(None, {"X": x, "axes": np.array([1, -1], np.int64)})


def test_reduce_keepdims0_runtime_axes_of_unknown_length_is_unsupported():
    node = helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)
    model = make_model([node], [("X", TP.FLOAT, [2, 3]), ("axes", TP.INT64, ["A"])], [("Y", TP.FLOAT, [None])])
    with pytest.raises(onnxc.UnsupportedError, match="keepdims=0"):
        onnxc.InferenceSession(model.SerializeToString())


def test_reduce_symbolic_dims_two_sizes():
    model = reduce_model(["ReduceSum", "ReduceL2", "ReduceMin"], ["N", "M", 4], np.float32, [0, 2], 1)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for shape in ((2, 3, 4), (5, 1, 4)):
        feeds = {"X": RNG.standard_normal(shape).astype(np.float32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


# ---- ArgMax / ArgMin -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.uint8])
def test_arg_max_min(dtype):
    x = RNG.integers(0, 4, (3, 4, 5)).astype(dtype)  # many ties
    nodes, outputs = [], []
    for op in ("ArgMax", "ArgMin"):
        for axis, keepdims, last in ((0, 1, 0), (1, 0, 1), (-1, 1, 1), (2, 0, 0)):
            name = f"{op}_{len(nodes)}"
            nodes.append(helper.make_node(op, ["X"], [name], axis=axis, keepdims=keepdims, select_last_index=last))
            outputs.append((name, TP.INT64, None))
    model = with_inferred_shapes(make_model(nodes, [("X", elem(dtype), ["N", 4, 5])], outputs, opset=13))
    assert_matches_ort(model, {"X": x})


# ---- CumSum / CumProd ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cum_sum(dtype):
    nodes, outputs, inits = [], [], []
    for i, (axis, exclusive, reverse) in enumerate(((0, 0, 0), (1, 1, 0), (-1, 0, 1), (2, 1, 1))):
        inits.append(const(f"axis{i}", axis))
        nodes.append(helper.make_node("CumSum", ["X", f"axis{i}"], [f"Y{i}"], exclusive=exclusive, reverse=reverse))
        outputs.append((f"Y{i}", elem(dtype), ["N", 3, 4]))
    nodes.append(helper.make_node("CumSum", ["X", "axis"], ["Yr"], reverse=1))
    outputs.append(("Yr", elem(dtype), ["N", 3, 4]))
    model = make_model(nodes, [("X", elem(dtype), ["N", 3, 4]), ("axis", TP.INT32, [])], outputs, inits, opset=14)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n, axis in ((2, 1), (3, -3)):
        feeds = {"X": RNG.integers(-5, 6, (n, 3, 4)).astype(dtype), "axis": np.array(axis, np.int32)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-6)


def test_cum_prod():
    """CumProd (opset 26) is newer than onnxruntime: compare with the ONNX reference."""
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("CumProd", ["X", "axis"], ["Y0"], exclusive=1),
             helper.make_node("CumProd", ["X", "minus1"], ["Y1"], reverse=1)]
    model = make_model(nodes, [("X", TP.FLOAT, [2, 3, 4]), ("axis", TP.INT64, [])],
                       [("Y0", TP.FLOAT, [2, 3, 4]), ("Y1", TP.FLOAT, [2, 3, 4])], [const("minus1", -1)], opset=26)
    for axis in (0, 1):
        assert_matches_reference(model, {"X": x, "axis": np.array(axis, np.int64)})


# ---- TopK ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_top_k_constant_k(dtype):
    x = RNG.integers(0, 6, (3, 7, 4)).astype(dtype)  # ties resolve to the lower index
    nodes, outputs, inits = [], [], []
    for i, (axis, k, largest) in enumerate(((1, 3, 1), (-1, 2, 0), (0, 3, 1), (2, 0, 1))):
        inits.append(const(f"k{i}", [k]))
        nodes.append(helper.make_node("TopK", ["X", f"k{i}"], [f"V{i}", f"I{i}"], axis=axis, largest=largest))
        shape = [3, 7, 4]
        shape[axis] = k
        outputs += [(f"V{i}", elem(dtype), shape), (f"I{i}", TP.INT64, shape)]
    model = make_model(nodes, [("X", elem(dtype), [3, 7, 4])], outputs, inits, opset=11)
    assert_matches_ort(model, {"X": x})


def test_top_k_runtime_k_and_symbolic_dims():
    node = helper.make_node("TopK", ["X", "K"], ["V", "I"], axis=1)
    model = make_model([node], [("X", TP.FLOAT, ["N", "M"]), ("K", TP.INT64, [1])],
                       [("V", TP.FLOAT, ["N", None]), ("I", TP.INT64, ["N", None])], opset=11)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for shape, k in (((3, 8), 3), ((2, 5), 5), ((4, 6), 0)):
        feeds = {"X": RNG.standard_normal(shape).astype(np.float32), "K": np.array([k], np.int64)}
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_array_equal(a, e)
    with pytest.raises(onnxc.RuntimeFailure, match="k is out of range"):
        sess.run(None, {"X": np.zeros((2, 3), np.float32), "K": np.array([4], np.int64)})


def test_top_k_attribute_k():
    node = helper.make_node("TopK", ["X"], ["V", "I"], axis=0, k=2)
    model = make_model([node], [("X", TP.FLOAT, [5, 3])], [("V", TP.FLOAT, [2, 3]), ("I", TP.INT64, [2, 3])],
                       opset=9)
    assert_matches_ort(model, {"X": RNG.standard_normal((5, 3)).astype(np.float32)})
