"""Parallel CUDA kernels of reductions and normalizations (templates/cuda/reduce, arg_reduce,
softmax, normalization, global_pool, lp_norm, batch_norm and cumulative .cu.j2) on the emulated
CUDA build: sizes that take several blocks, results compared with onnxruntime (with numpy
where onnxc follows its own NaN rules), and the generated source checked to launch each node
in parallel: a block per row (a sync launch) or a grid of threads, not one thread.
"""
from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from helpers import cuda_launches as launches
from helpers import cuda_session, make_model, run_ort, softmax_bfloat16_by_steps
from onnxc.runtime import cuda

CUDA = "CUDAExecutionProvider"
SMALL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def check(model, feeds, expect_launch: dict[str, str], reference=None, **tol) -> None:
    """Run on the emulated CUDA build, compare with onnxruntime (or ``reference``) and check the launches."""
    sess = cuda_session(model)
    got = sess.run(None, feeds)
    want = reference if reference is not None else run_ort(model, feeds)
    for name, g, w in zip([o.name for o in model.graph.output], got, want):
        assert g.shape == w.shape, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, equal_nan=True, err_msg=name, **(tol or SMALL))
    kinds = launches(sess)
    assert {n: kinds.get(n) for n in expect_launch} == expect_launch


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def reduce_node(op, x, axes, keepdims, name):
    return helper.make_node(op, [x, axes], [name], name=name, keepdims=keepdims)


def axes_tensor(name, axes):
    return helper.make_tensor(name, TP.INT64, [len(axes)], axes)


def test_reductions_over_contiguous_rows_take_a_block_per_row():
    # 5 rows of 300: every op's partial results merged over the block (products of values near 1)
    x = np.abs(rand(5, 300)) * 0.05 + 0.99
    x[2, ::3] *= -1
    nodes = [reduce_node(op, "x", "last", 0, op) for op in REDUCE_OPS]
    outputs = [(op, TP.FLOAT, ["N"]) for op in REDUCE_OPS]
    # integers wrap around (int32 sums of large values), as onnxruntime's do
    xi = np.random.default_rng(1).integers(-2**30, 2**30, (3, 257)).astype(np.int32)
    int_ops = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1"]
    nodes += [reduce_node(op, "xi", "last", 1, "int_" + op) for op in int_ops]
    outputs += [("int_" + op, TP.INT32, [3, 1]) for op in int_ops]
    # MeanVarianceNormalization over the inner axes: its passes, then a mapping pass, by rows
    xm = rand(2, 3, 10, 10, seed=3)
    nodes.append(helper.make_node("MeanVarianceNormalization", ["xm"], ["mvn"], name="mvn", axes=[2, 3]))
    outputs.append(("mvn", TP.FLOAT, [2, 3, 10, 10]))
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 300]), ("xi", TP.INT32, [3, 257]), ("xm", TP.FLOAT, [2, 3, 10, 10])],
                       outputs, [axes_tensor("last", [-1])], opset=18)
    wide = xi.astype(np.int64)
    reference = run_ort(model, {"x": x, "xi": xi, "xm": xm})
    reference[len(REDUCE_OPS):len(REDUCE_OPS) + 4] = [
        wide.sum(1, keepdims=True).astype(np.int32), xi.max(1, keepdims=True), xi.min(1, keepdims=True),
        np.abs(wide).sum(1, keepdims=True).astype(np.int32)]
    check(model, {"x": x, "xi": xi, "xm": xm}, {n.name: "block" for n in nodes}, reference=reference)


def test_reductions_over_strided_axes_take_a_thread_per_output():
    x = rand(40, 7, 9, seed=2)
    ops = ["ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceL2"]
    # the first axis; the outer and inner axes around a kept one ([reduced, kept, reduced]);
    # axes read at run time (strides computed by every thread)
    nodes, outputs = [], []
    for op in ops:
        nodes += [reduce_node(op, "x", "first", 0, op + "_first"), reduce_node(op, "x", "outer_inner", 1, op + "_around"),
                  reduce_node(op, "x", "axes", 1, op + "_runtime")]
        outputs += [(op + "_first", TP.FLOAT, [7, 9]), (op + "_around", TP.FLOAT, [1, 7, 1]),
                    (op + "_runtime", TP.FLOAT, [40, 1, 9])]
    # MeanVarianceNormalization over N, H and W
    xm = rand(2, 3, 4, 5, seed=3)
    nodes.append(helper.make_node("MeanVarianceNormalization", ["xm"], ["mvn"], name="mvn"))
    outputs.append(("mvn", TP.FLOAT, [2, 3, 4, 5]))
    model = make_model(nodes, [("x", TP.FLOAT, ["A", 7, 9]), ("axes", TP.INT64, [1]), ("xm", TP.FLOAT, [2, 3, 4, 5])],
                       outputs, [axes_tensor("first", [0]), axes_tensor("outer_inner", [0, 2])], opset=18)
    check(model, {"x": x, "axes": np.array([-2], np.int64), "xm": xm}, {n.name: "grid" for n in nodes})


def test_nan_wins_as_in_the_c_build():
    """Max/Min and ArgMax/ArgMin pick NaN, as the C build does (onnxruntime's builds differ)."""
    x = rand(4, 300, seed=4)
    x[1, 17] = x[1, 200] = np.nan
    x[3, 250] = np.nan
    nodes = [helper.make_node("ReduceMax", ["x"], ["max_rows"], name="max_rows", axes=[1]),
             helper.make_node("ReduceMin", ["x"], ["min_cols"], name="min_cols", axes=[0]),
             helper.make_node("ArgMax", ["x"], ["first"], name="first", axis=1),
             helper.make_node("ArgMin", ["x"], ["last"], name="last", axis=1, select_last_index=1)]
    model = make_model(nodes, [("x", TP.FLOAT, [4, 300])],
                       [("max_rows", TP.FLOAT, [4, 1]), ("min_cols", TP.FLOAT, [1, 300]),
                        ("first", TP.INT64, [4, 1]), ("last", TP.INT64, [4, 1])], opset=17)
    # numpy's max, min and argmax take NaN too; the last NaN (or minimum) is the first one of the reversed rows
    last = 299 - np.argmin(x[:, ::-1], axis=1, keepdims=True)
    reference = [x.max(1, keepdims=True), x.min(0, keepdims=True), np.argmax(x, axis=1, keepdims=True), last]
    assert reference[2][1, 0] == 17 and reference[3][1, 0] == 200
    check(model, {"x": x}, {"max_rows": "block", "min_cols": "grid", "first": "block", "last": "block"},
          reference=reference)


def test_arg_reduce_ties_pick_the_first_or_last_index():
    x = np.random.default_rng(5).integers(0, 8, (6, 300)).astype(np.int32)
    xf = rand(30, 20, seed=6)
    nodes = [helper.make_node("ArgMax", ["x"], ["max_first"], name="max_first", axis=-1),
             helper.make_node("ArgMax", ["x"], ["max_last"], name="max_last", axis=-1, select_last_index=1),
             helper.make_node("ArgMin", ["x"], ["min_first"], name="min_first", axis=1, keepdims=0),
             helper.make_node("ArgMin", ["x"], ["min_last"], name="min_last", axis=1, select_last_index=1),
             helper.make_node("ArgMax", ["xf"], ["strided"], name="strided", axis=0)]
    model = make_model(nodes, [("x", TP.INT32, ["N", 300]), ("xf", TP.FLOAT, [30, 20])],
                       [("max_first", TP.INT64, ["N", 1]), ("max_last", TP.INT64, ["N", 1]),
                        ("min_first", TP.INT64, ["N"]), ("min_last", TP.INT64, ["N", 1]),
                        ("strided", TP.INT64, [1, 20])], opset=13)
    check(model, {"x": x, "xf": xf}, {"max_first": "block", "max_last": "block", "min_first": "block",
                                      "min_last": "block", "strided": "grid"})


def test_softmax_family_rows_and_strided_axes():
    nodes, inputs, outputs, feeds = [], [], [], {}
    for dtype, np_type in ((TP.FLOAT, np.float32), (TP.DOUBLE, np.float64)):
        t = "f" if dtype == TP.FLOAT else "d"
        x = (rand(5, 300, seed=7) * 4).astype(np_type)
        x[3] = np.round(x[3])   # ties for Hardmax: the first index wins
        feeds |= {"x" + t: x, "xs" + t: rand(40, 30, seed=8).astype(np_type)}
        inputs += [("x" + t, dtype, ["N", 300]), ("xs" + t, dtype, [40, 30])]
        ops = ["Softmax", "LogSoftmax"] + (["Hardmax"] if dtype == TP.FLOAT else [])   # onnxruntime: no double Hardmax
        for op in ops:
            nodes += [helper.make_node(op, ["x" + t], [op + "_rows_" + t], name=op + "_rows_" + t),
                      helper.make_node(op, ["xs" + t], [op + "_axis0_" + t], name=op + "_axis0_" + t, axis=0)]
            outputs += [(op + "_rows_" + t, dtype, ["N", 300]), (op + "_axis0_" + t, dtype, [40, 30])]
    model = make_model(nodes, inputs, outputs, opset=13)
    check(model, feeds, {n.name: "block" if "_rows_" in n.name else "grid" for n in nodes})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_softmax_16bit_on_rows_and_strided_axes(dtype):
    """float16/bfloat16 Softmax on rows (a block each) and along a strided axis (a thread per row),
    as the C build computes it: bfloat16 each step rounded and the row summed in index order in
    bfloat16, ONNX's reference's bits; float16 in float32 rounded once, onnxruntime's result."""
    import ml_dtypes
    np_type = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(np_type))
    x, xs = (rand(5, 300, seed=17) * 4).astype(np_type), (rand(40, 30, seed=18) * 4).astype(np_type)
    nodes = [helper.make_node("Softmax", ["x"], ["rows"], name="rows"),
             helper.make_node("Softmax", ["xs"], ["axis0"], name="axis0", axis=0)]
    model = make_model(nodes, [("x", elem, [5, 300]), ("xs", elem, [40, 30])],
                       [("rows", elem, [5, 300]), ("axis0", elem, [40, 30])], opset=13)
    if np_type is np.float16:
        check(model, {"x": x, "xs": xs}, {"rows": "block", "axis0": "grid"}, rtol=1e-3, atol=1e-6)
    else:
        check(model, {"x": x, "xs": xs}, {"rows": "block", "axis0": "grid"},
              reference=[softmax_bfloat16_by_steps(x, -1), softmax_bfloat16_by_steps(xs, 0)], rtol=0, atol=0)


def test_normalizations_take_a_block_per_unit():
    x = rand(3, 4, 96, seed=9)
    xi = rand(2, 4, 9, 9, seed=10)
    scale, bias = rand(96, seed=11), rand(96, seed=12)
    scale2, bias2 = rand(4, 96, seed=13), rand(4, 96, seed=14)
    channel_scale, channel_bias = rand(4, seed=15), rand(4, seed=16)
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(a, n) for a, n in ((scale, "scale"), (bias, "bias"), (scale2, "scale2"),
                                                         (bias2, "bias2"), (channel_scale, "cs"), (channel_bias, "cb"))]
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["ln", "mean", "inv_std"], name="ln"),
             helper.make_node("LayerNormalization", ["x", "scale2", "bias2"], ["ln_pq"], name="ln_pq", axis=1),
             helper.make_node("InstanceNormalization", ["xi", "cs", "cb"], ["inorm"], name="inorm"),
             helper.make_node("GroupNormalization", ["xi", "cs", "cb"], ["gnorm"], name="gnorm", num_groups=2)]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 4, 96]), ("xi", TP.FLOAT, [2, 4, 9, 9])],
                       [("ln", TP.FLOAT, ["N", 4, 96]), ("mean", TP.FLOAT, ["N", 4, 1]),
                        ("inv_std", TP.FLOAT, ["N", 4, 1]), ("ln_pq", TP.FLOAT, ["N", 4, 96]),
                        ("inorm", TP.FLOAT, [2, 4, 9, 9]), ("gnorm", TP.FLOAT, [2, 4, 9, 9])], inits, opset=21)
    check(model, {"x": x, "xi": xi}, {"ln": "block", "ln_pq": "block", "inorm": "block", "gnorm": "block"})


def test_global_pools_by_planes():
    big, small = rand(2, 3, 12, 12, seed=17), rand(2, 300, 2, 2, seed=18)
    nodes = []
    for op, extra in (("GlobalAveragePool", {}), ("GlobalMaxPool", {}), ("GlobalLpPool", {"p": 3})):
        nodes.append(helper.make_node(op, ["big"], [op + "_big"], name=op + "_big", **extra))
        nodes.append(helper.make_node(op, ["small"], [op + "_small"], name=op + "_small", **extra))
    model = make_model(nodes, [("big", TP.FLOAT, ["N", 3, 12, 12]), ("small", TP.FLOAT, [2, 300, 2, 2])],
                       [(n.output[0], TP.FLOAT, ["N", 3, 1, 1] if "big" in n.name else [2, 300, 1, 1])
                        for n in nodes], opset=13)
    check(model, {"big": big, "small": small},
          {n.name: "block" if n.name.endswith("big") else "grid" for n in nodes})


def test_lp_and_batch_normalization():
    x, xs = rand(5, 300, seed=19), rand(30, 20, seed=20)
    xb = rand(2, 3, 10, 10, seed=21)
    params = [rand(3, seed=22), rand(3, seed=23), rand(3, seed=24), np.abs(rand(3, seed=25)) + 0.5]
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(a, n) for a, n in zip(params, ("s", "b", "m", "v"))]
    nodes = [helper.make_node("LpNormalization", ["x"], ["l1"], name="l1", p=1),
             helper.make_node("LpNormalization", ["x"], ["l2"], name="l2", p=2),
             helper.make_node("LpNormalization", ["xs"], ["l2_axis0"], name="l2_axis0", axis=0),
             helper.make_node("BatchNormalization", ["xb", "s", "b", "m", "v"], ["bn"], name="bn")]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 300]), ("xs", TP.FLOAT, [30, 20]),
                               ("xb", TP.FLOAT, [2, 3, 10, 10])],
                       [("l1", TP.FLOAT, ["N", 300]), ("l2", TP.FLOAT, ["N", 300]), ("l2_axis0", TP.FLOAT, [30, 20]),
                        ("bn", TP.FLOAT, [2, 3, 10, 10])], inits, opset=15)
    check(model, {"x": x, "xs": xs, "xb": xb}, {"l1": "block", "l2": "block", "l2_axis0": "grid", "bn": "grid"})


def test_batch_normalization_training_takes_a_block_per_channel():
    x = rand(4, 3, 9, 9, seed=26)
    s, b, m, v = rand(3, seed=27), rand(3, seed=28), rand(3, seed=29), np.abs(rand(3, seed=30)) + 0.5
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(a, n) for a, n in zip((s, b, m, v), ("s", "b", "m", "v"))]
    model = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                                         name="bn", training_mode=1, momentum=0.8)],
                       [("x", TP.FLOAT, [4, 3, 9, 9])],
                       [("y", TP.FLOAT, [4, 3, 9, 9]), ("rm", TP.FLOAT, [3]), ("rv", TP.FLOAT, [3])], inits, opset=15)
    mu, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    y = (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * s[None, :, None, None] \
        + b[None, :, None, None]
    check(model, {"x": x}, {"bn": "block"}, reference=[y, m * 0.8 + mu * 0.2, v * 0.8 + var * 0.2])


def test_cumsum_takes_a_thread_per_line():
    x = rand(7, 300, seed=31)
    xi = np.random.default_rng(32).integers(-100, 100, (40, 9)).astype(np.int32)
    nodes = [helper.make_node("CumSum", ["x", "one"], ["rows"], name="rows"),
             helper.make_node("CumSum", ["x", "zero"], ["cols"], name="cols", exclusive=1, reverse=1),
             helper.make_node("CumSum", ["xi", "axis"], ["runtime_axis"], name="runtime_axis", reverse=1)]
    inits = [helper.make_tensor("one", TP.INT64, [], [1]), helper.make_tensor("zero", TP.INT64, [], [0])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 300]), ("xi", TP.INT32, [40, 9]), ("axis", TP.INT64, [])],
                       [("rows", TP.FLOAT, ["N", 300]), ("cols", TP.FLOAT, ["N", 300]),
                        ("runtime_axis", TP.INT32, [40, 9])], inits, opset=14)
    check(model, {"x": x, "xi": xi, "axis": np.array(0, np.int64)},
          {"rows": "grid", "cols": "grid", "runtime_axis": "grid"})
