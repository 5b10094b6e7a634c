"""MatMul, Gemm, MatMulInteger, Einsum and Det against onnxruntime (or the ONNX reference
implementation / numpy where onnxruntime has no kernel)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

RNG = np.random.default_rng(11)


def randn(shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def randint(shape, dtype, low=-20, high=20) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(dtype)


def run_onnxc(model, feeds):
    return onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)


def assert_close(actual, expected, rtol=1e-4, atol=1e-5):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} vs {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} vs {e.shape}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"output {i}")


def binary_model(op, a_shape, b_shape, elem, out_rank, opset=21, **attrs):
    return make_model([helper.make_node(op, ["A", "B"], ["Y"], **attrs)],
                      [("A", elem, a_shape), ("B", elem, b_shape)], [("Y", elem, [None] * out_rank)], opset=opset)


# ---- MatMul -------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ([3, 4], [4, 5]),
    ([7], [7, 5]),
    ([2, 3, 7], [7]),
    ([7], [7]),
    ([2, 1, 9, 20], [3, 20, 30]),
    ([2, 3, 9, 20], [20, 30]),
    ([1, 13, 20], [5, 20, 30]),
    ([67, 300], [300, 70]),          # several k blocks and edge tiles of the GEMM
    ([2, 5], [3, 5, 2]),
]


def test_matmul_shapes():
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i, (a_shape, b_shape) in enumerate(MATMUL_SHAPES):
        nodes.append(helper.make_node("MatMul", [f"A{i}", f"B{i}"], [f"Y{i}"]))
        inputs += [(f"A{i}", TP.FLOAT, a_shape), (f"B{i}", TP.FLOAT, b_shape)]
        outputs.append((f"Y{i}", TP.FLOAT, [None] * np.matmul(np.ones(a_shape), np.ones(b_shape)).ndim))
        feeds.update({f"A{i}": randn(a_shape), f"B{i}": randn(b_shape)})
    assert_matches_ort(make_model(nodes, inputs, outputs), feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("elem, dtype", [(TP.DOUBLE, np.float64), (TP.INT32, np.int32), (TP.INT64, np.int64),
                                         (TP.UINT32, np.uint32), (TP.UINT64, np.uint64)])
def test_matmul_types(elem, dtype):
    a = randint([2, 9, 13], dtype, 0 if dtype in (np.uint32, np.uint64) else -20)
    b = randint([13, 6], dtype, 0 if dtype in (np.uint32, np.uint64) else -20)
    assert_matches_ort(binary_model("MatMul", a.shape, b.shape, elem, 3), {"A": a, "B": b})


def test_matmul_integer_wraps():
    a = np.array([[2**31 - 1, 2]], np.int32)
    b = np.array([[3], [2**30]], np.int32)
    (y,) = run_onnxc(binary_model("MatMul", a.shape, b.shape, TP.INT32, 2), {"A": a, "B": b})
    np.testing.assert_array_equal(y, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))


@pytest.mark.parametrize("elem, dtype", [(TP.FLOAT16, np.float16), (TP.BFLOAT16, ml_dtypes.bfloat16)])
def test_matmul_half_types(elem, dtype):
    a, b = randn([2, 6, 20]).astype(dtype), randn([20, 9]).astype(dtype)
    (y,) = run_onnxc(binary_model("MatMul", a.shape, b.shape, elem, 3), {"A": a, "B": b})
    expected = a.astype(np.float32) @ b.astype(np.float32)
    assert y.dtype == dtype
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=2e-2, atol=5e-2)


def test_matmul_symbolic_batch():
    nodes = [helper.make_node("MatMul", ["A", "W"], ["Y"]), helper.make_node("MatMul", ["A", "B"], ["Z"])]
    model = make_model(nodes, [("A", TP.FLOAT, ["N", "S", 20]), ("W", TP.FLOAT, [20, 30]),
                               ("B", TP.FLOAT, ["N", 20, "T"])],
                       [("Y", TP.FLOAT, ["N", "S", 30]), ("Z", TP.FLOAT, ["N", "S", "T"])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    w = randn([20, 30])
    for n, s, t in ((3, 9, 6), (1, 17, 2)):
        feeds = {"A": randn([n, s, 20]), "W": w, "B": randn([n, 20, t])}
        assert_close(sess.run(None, feeds), run_ort(model, feeds), atol=1e-4)


def test_matmul_mismatched_inner_dim_fails():
    model = make_model([helper.make_node("MatMul", ["A", "B"], ["Y"])],
                       [("A", TP.FLOAT, [2, "K"]), ("B", TP.FLOAT, ["J", 3])], [("Y", TP.FLOAT, [2, 3])])
    with pytest.raises(onnxc.RuntimeFailure):
        run_onnxc(model, {"A": randn([2, 4]), "B": randn([5, 3])})


# ---- Gemm ---------------------------------------------------------------------------------

GEMM_CASES = [  # (A, B, C shape or None, attrs)
    ([3, 5], [5, 4], None, {}),
    ([1, 50], [30, 50], [30], {"transB": 1}),
    ([2, 50], [30, 50], [1], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ([50, 9], [30, 50], [9, 1], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    ([70, 90], [90, 40], [70, 40], {"beta": 0.0}),
    ([9, 6], [9, 20], [], {"transA": 1, "beta": 0.25}),
]


def test_gemm():
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i, (a_shape, b_shape, c_shape, attrs) in enumerate(GEMM_CASES):
        names = [f"A{i}", f"B{i}"] + ([f"C{i}"] if c_shape is not None else [])
        shapes = [a_shape, b_shape] + ([c_shape] if c_shape is not None else [])
        nodes.append(helper.make_node("Gemm", names, [f"Y{i}"], **attrs))
        inputs += [(n, TP.FLOAT, s) for n, s in zip(names, shapes)]
        outputs.append((f"Y{i}", TP.FLOAT, [None, None]))
        feeds.update({n: randn(s) for n, s in zip(names, shapes)})
    assert_matches_ort(make_model(nodes, inputs, outputs), feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset, attrs", [(6, {"broadcast": 1}), (9, {}), (11, {})])
def test_gemm_old_opsets(opset, attrs):
    model = make_model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=2.0, **attrs)],
                       [("A", TP.FLOAT, [4, 6]), ("B", TP.FLOAT, [6, 5]), ("C", TP.FLOAT, [5])],
                       [("Y", TP.FLOAT, [4, 5])], opset=opset)
    a, b, c = randn([4, 6]), randn([6, 5]), randn([5])
    (y,) = run_onnxc(model, {"A": a, "B": b, "C": c})
    np.testing.assert_allclose(y, 2 * a @ b + c, rtol=1e-5, atol=1e-5)


def test_gemm_types_and_symbolic_rows():
    model = make_model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transB=1, beta=0.5)],
                       [("A", TP.FLOAT, ["N", 9]), ("B", TP.FLOAT, [4, 9]), ("C", TP.FLOAT, ["N", 1])],
                       [("Y", TP.FLOAT, ["N", 4])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    b = randn([4, 9])
    for n in (5, 2):
        feeds = {"A": randn([n, 9]), "B": b, "C": randn([n, 1])}
        assert_close(sess.run(None, feeds), run_ort(model, feeds), atol=1e-5)
    half = make_model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transA=1, alpha=0.5)],
                      [("A", TP.FLOAT16, [12, 7]), ("B", TP.FLOAT16, [12, 5]), ("C", TP.FLOAT16, [5])],
                      [("Y", TP.FLOAT16, [7, 5])])
    a, b, c = randn([12, 7], np.float16), randn([12, 5], np.float16), randn([5], np.float16)
    (y,) = run_onnxc(half, {"A": a, "B": b, "C": c})
    expected = 0.5 * a.astype(np.float32).T @ b.astype(np.float32) + c.astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=1e-2, atol=2e-2)
    ints = make_model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=3.0, beta=-2.0)],
                      [("A", TP.INT64, [3, 4]), ("B", TP.INT64, [4, 5]), ("C", TP.INT64, [3, 1])],
                      [("Y", TP.INT64, [3, 5])], opset=13)
    a, b, c = randint([3, 4], np.int64), randint([4, 5], np.int64), randint([3, 1], np.int64)
    (y,) = run_onnxc(ints, {"A": a, "B": b, "C": c})
    np.testing.assert_array_equal(y, 3 * a @ b - 2 * c)


# ---- MatMulInteger ------------------------------------------------------------------------

def test_matmul_integer():
    a, b = randint([2, 5, 16], np.uint8, 0, 255), randint([16, 7], np.int8, -128, 127)
    az, bz = np.array([12], np.uint8), randint([7], np.int8, -3, 3)
    model = make_model([helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])],
                       [("A", TP.UINT8, a.shape), ("B", TP.INT8, b.shape), ("az", TP.UINT8, [1]),
                        ("bz", TP.INT8, [7])], [("Y", TP.INT32, [2, 5, 7])])
    feeds = {"A": a, "B": b, "az": az, "bz": bz}
    (y,) = run_onnxc(model, feeds)
    expected = (a.astype(np.int32) - 12) @ (b.astype(np.int32) - bz.astype(np.int32))
    np.testing.assert_array_equal(y, expected)


def test_matmul_integer_per_row_zero_points():
    a, b = randint([3, 4, 6], np.int8), randint([3, 6, 5], np.uint8, 0, 255)
    az, bz = randint([3, 4, 1], np.int8, -4, 4), randint([3, 1, 5], np.uint8, 0, 9)
    model = make_model([helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])],
                       [("A", TP.INT8, a.shape), ("B", TP.UINT8, b.shape), ("az", TP.INT8, az.shape),
                        ("bz", TP.UINT8, bz.shape)], [("Y", TP.INT32, [3, 4, 5])])
    (y,) = run_onnxc(model, {"A": a, "B": b, "az": az, "bz": bz})
    np.testing.assert_array_equal(y, (a.astype(np.int32) - az) @ (b.astype(np.int32) - bz))


# ---- Einsum -------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [[3, 4], [4, 5]]),
    ("ij,jk", [[3, 4], [4, 5]]),
    ("ii->i", [[4, 4]]),
    ("ii", [[4, 4]]),
    ("bii->bi", [[2, 3, 3]]),
    ("...ij->...ji", [[2, 3, 4, 5]]),
    ("...ij,...jk->...ik", [[2, 3, 4], [1, 4, 5]]),
    ("...ij,jk->...ik", [[2, 3, 3, 4], [4, 5]]),
    ("i,j->ij", [[3], [4]]),
    ("bhqd,bhkd->bhqk", [[2, 3, 4, 5], [2, 3, 6, 5]]),
    ("ijk->", [[2, 3, 4]]),
    ("Ab,bC->AC", [[2, 3], [3, 4]]),
    ("i i , i -> i", [[3, 3], [3]]),
    ("ab,bc,cd->ad", [[2, 3], [3, 4], [4, 2]]),
]


def einsum_model(eq, shapes, elem):
    names = [f"x{i}" for i in range(len(shapes))]
    out_rank = np.einsum(eq, *[np.ones(s) for s in shapes]).ndim
    return make_model([helper.make_node("Einsum", names, ["Y"], equation=eq)],
                      [(n, elem, s) for n, s in zip(names, shapes)], [("Y", elem, [None] * out_rank)]), names


def test_einsum():
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i, (eq, shapes) in enumerate(EINSUM_CASES):
        names = [f"x{i}_{j}" for j in range(len(shapes))]
        nodes.append(helper.make_node("Einsum", names, [f"Y{i}"], equation=eq))
        inputs += [(n, TP.FLOAT, s) for n, s in zip(names, shapes)]
        outputs.append((f"Y{i}", TP.FLOAT, [None] * np.einsum(eq, *[np.ones(s) for s in shapes]).ndim))
        feeds.update({n: randn(s) for n, s in zip(names, shapes)})
    assert_matches_ort(make_model(nodes, inputs, outputs), feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("elem, dtype", [(TP.INT32, np.int32), (TP.INT8, np.int8), (TP.UINT16, np.uint16),
                                         (TP.DOUBLE, np.float64)])
def test_einsum_types(elem, dtype):
    model, names = einsum_model("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]], elem)
    feeds = {n: randint(s, dtype, 0, 9) for n, s in zip(names, [[2, 3, 4], [2, 4, 5]])}
    (y,) = run_onnxc(model, feeds)
    expected = np.einsum("bij,bjk->bik", *[feeds[n].astype(np.int64) for n in names])
    np.testing.assert_array_equal(y, expected.astype(dtype))


def test_einsum_symbolic():
    model = make_model([helper.make_node("Einsum", ["A", "B"], ["Y"], equation="bij,bjk->bik")],
                       [("A", TP.FLOAT, ["N", 3, "K"]), ("B", TP.FLOAT, ["N", "K", 5])],
                       [("Y", TP.FLOAT, ["N", 3, 5])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n, k in ((2, 4), (3, 7)):
        feeds = {"A": randn([n, 3, k]), "B": randn([n, k, 5])}
        assert_close(sess.run(None, feeds), run_ort(model, feeds), atol=1e-5)


# ---- Det ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 3])
def test_few_rows_against_weights_split_by_columns_between_threads(rows):
    """A GEMV against packed weights is split by columns at 2 threads (each streams its share
    of the weights); the bias and activation still reach every column, the odd last panel too."""
    w, b = randn([784, 500]) * 0.05, randn([500])
    model = make_model([helper.make_node("Gemm", ["X", "W", "B"], ["G"]), helper.make_node("Relu", ["G"], ["Y"])],
                       [("X", TP.FLOAT, [rows, 784])], [("Y", TP.FLOAT, [rows, 500])],
                       [helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()), helper.make_tensor("B", TP.FLOAT, [500], b)])
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    x = randn([rows, 784])
    assert_close(onnxc.InferenceSession(model.SerializeToString(), so).run(None, {"X": x}),
                 run_ort(model, {"X": x}), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("elem, dtype, shape", [(TP.FLOAT, np.float32, [3, 3]), (TP.FLOAT, np.float32, [2, 4, 5, 5]),
                                                (TP.DOUBLE, np.float64, [3, 4, 4])])
def test_det(elem, dtype, shape):
    x = randn(shape, dtype)
    x[..., 0, :] *= 1e-3  # a small pivot forces row swaps
    model = make_model([helper.make_node("Det", ["X"], ["Y"])], [("X", elem, shape)],
                       [("Y", elem, shape[:-2])])
    (y,) = run_onnxc(model, {"X": x})
    np.testing.assert_allclose(y, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_det_singular_and_symbolic_batch():
    model = make_model([helper.make_node("Det", ["X"], ["Y"])], [("X", TP.FLOAT, ["N", 3, 3])],
                       [("Y", TP.FLOAT, ["N"])])
    sess = onnxc.InferenceSession(model.SerializeToString())
    x = randn([2, 3, 3])
    x[1, 2] = x[1, 0] + x[1, 1]
    y = sess.run(None, {"X": x})[0]
    np.testing.assert_allclose(y, np.linalg.det(x.astype(np.float64)), atol=1e-5)
    y = sess.run(None, {"X": x[:1]})[0]
    assert y.shape == (1,)
    ref = ReferenceEvaluator(model).run(None, {"X": x[:1]})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-5)


@pytest.mark.parametrize("rows, threads", [(1, 1), (1, 2), (3, 1), (3, 2), (4, 2)])
def test_a_linear_layers_big_weights_against_few_rows_are_read_as_they_are(rows, threads):
    """Weights of a Linear layer (Gemm transB=1) of 4 MiB or more against fewer than 4 rows known
    when compiling are not packed (the product streams them either way); with 4 rows they are."""
    from onnxc.driver import generate_source
    from test_gemm_tails import assert_linear, linear_expected, linear_feeds, linear_model
    model, feeds = linear_model(rows), linear_feeds(rows)
    assert ("w_Gemm_B_packed" in generate_source(model).source) == (rows >= 4)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    assert_linear(onnxc.InferenceSession(model.SerializeToString(), so).run(None, feeds),
                  linear_expected(model, feeds))
