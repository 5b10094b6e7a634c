"""The float32 GEMM's last columns (c/helpers/sgemm.c.j2, onnxc_sgemm_edge and, for several row
panels at once, onnxc_sgemm_columns_panels): a product whose column count is not a multiple of
the tile's (NR = 32 with AVX-512, 16 with AVX2, 8 with NEON) ends in a half tile, a few single
columns, both, or a whole tile, by how many columns are left.
Every remainder class of every family is here, with edge rows and k blocks that accumulate; the
AVX2 and AVX-512 builds run it in tests/test_isa_matrix.py, the NEON build under qemu in
tests/test_aarch64.py."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

import onnxc

from helpers import make_model, run_onnxc

# Columns of the MatMuls: remainders 1-31 of 32 (AVX-512), 1-15 of 16 (AVX2), 1-7 of 8 (NEON),
# in each of their branches (columns only, a half tile, a half tile and columns, a whole tile).
COLUMNS = (1, 3, 4, 5, 6, 8, 9, 14, 15, 16, 17, 20, 24, 25, 31, 33, 37, 49)
# 4 x 12 + 8 rows: a group of four row panels, whose last columns are computed together (with
# AVX2's 6-row panels, two groups and two panels), and an edge row panel; k blocks of 256 and 44
ROWS, DEPTH = 56, 300


def column_tails_model() -> onnx.ModelProto:
    """y_n = a (56 x 300) @ w_n (300 x n) for each n of COLUMNS (B packed at compile time), and
    a 1x1 Conv of 300 to 56 channels on a 7 x 7 map (49 columns, A packed) with a residual and
    x * sigmoid(x) fused into its epilogue."""
    rng = np.random.default_rng(11)
    nodes, inits, outputs = [], [], []
    for n in COLUMNS:
        inits.append(numpy_helper.from_array((rng.standard_normal((DEPTH, n)) / np.sqrt(DEPTH)).astype(np.float32),
                                             f"w{n}"))
        nodes.append(helper.make_node("MatMul", ["a", f"w{n}"], [f"y{n}"]))
        outputs.append((f"y{n}", T.FLOAT, [ROWS, n]))
    inits += [numpy_helper.from_array((rng.standard_normal((ROWS, DEPTH, 1, 1)) / np.sqrt(DEPTH)).astype(np.float32),
                                      "cw"),
              numpy_helper.from_array(rng.standard_normal(ROWS).astype(np.float32), "cb")]
    nodes += [helper.make_node("Conv", ["x", "cw", "cb"], ["c"]), helper.make_node("Add", ["c", "r"], ["s"]),
              helper.make_node("Sigmoid", ["s"], ["g"]), helper.make_node("Mul", ["s", "g"], ["z"])]
    outputs.append(("z", T.FLOAT, [1, ROWS, 7, 7]))
    return make_model(nodes, [("a", T.FLOAT, [ROWS, DEPTH]), ("x", T.FLOAT, [1, DEPTH, 7, 7]),
                              ("r", T.FLOAT, [1, ROWS, 7, 7])], outputs, inits, opset=17)


def column_tails_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(12)
    return {"a": rng.standard_normal((ROWS, DEPTH)).astype(np.float32),
            "x": rng.standard_normal((1, DEPTH, 7, 7)).astype(np.float32),
            "r": rng.standard_normal((1, ROWS, 7, 7)).astype(np.float32)}


def column_tails_expected(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs in float64 numpy."""
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    a = feeds["a"].astype(np.float64)
    out = [a @ w[f"w{n}"] for n in COLUMNS]
    x = feeds["x"].astype(np.float64).reshape(DEPTH, 49)
    s = (w["cw"].reshape(ROWS, DEPTH) @ x + w["cb"][:, None]).reshape(1, ROWS, 7, 7) + feeds["r"]
    return out + [s / (1.0 + np.exp(-s))]


def assert_column_tails(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for name, g, w in zip([f"y{n}" for n in COLUMNS] + ["z"], got, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_every_column_remainder_matches_numpy_and_does_not_depend_on_threads():
    """The columns a half tile or the column kernel computes sum their products in the whole
    tile's order, so the results are the same bits whichever thread (and so whichever tile
    kind) gets them."""
    model, feeds = column_tails_model(), column_tails_feeds()
    one = run_onnxc(model, feeds)
    assert_column_tails(one, column_tails_expected(model, feeds))
    options = onnxc.SessionOptions()
    options.intra_op_num_threads = 2
    two = run_onnxc(model, feeds, sess_options=options)
    for name, a, b in zip([f"y{n}" for n in COLUMNS] + ["z"], one, two):
        np.testing.assert_array_equal(a, b, err_msg=name)


# Rows of the MatMuls: every remainder of a 12-row panel (AVX-512, NEON) and of a 6-row one
# (AVX2), alone and after whole panels; under 4 rows the products stream B (onnxc_sgemv_packed_b).
ROW_COUNTS = tuple(range(1, 24)) + (29, 197)


def row_tails_model() -> onnx.ModelProto:
    """y_m = relu(a_m (m x 300) @ w (300 x 40) + bias + r_m) for each m of ROW_COUNTS: the bias,
    the residual and the activation are the MatMul's epilogue, which the last rows' tiles leave
    to a pass over what they stored."""
    rng = np.random.default_rng(13)
    inits = [numpy_helper.from_array((rng.standard_normal((DEPTH, 40)) / np.sqrt(DEPTH)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "bias")]
    nodes, inputs, outputs = [], [], []
    for m in ROW_COUNTS:
        nodes += [helper.make_node("MatMul", [f"a{m}", "w"], [f"p{m}"]),
                  helper.make_node("Add", [f"p{m}", "bias"], [f"q{m}"]),
                  helper.make_node("Add", [f"q{m}", f"r{m}"], [f"s{m}"]),
                  helper.make_node("Relu", [f"s{m}"], [f"y{m}"])]
        inputs += [(f"a{m}", T.FLOAT, [m, DEPTH]), (f"r{m}", T.FLOAT, [m, 40])]
        outputs.append((f"y{m}", T.FLOAT, [m, 40]))
    return make_model(nodes, inputs, outputs, inits, opset=17)


def row_tails_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(14)
    feeds = {}
    for m in ROW_COUNTS:
        feeds[f"a{m}"] = rng.standard_normal((m, DEPTH)).astype(np.float32)
        feeds[f"r{m}"] = rng.standard_normal((m, 40)).astype(np.float32)
    return feeds


def assert_row_tails(model: onnx.ModelProto, feeds: dict[str, np.ndarray], got: list[np.ndarray], what: str) -> None:
    """Each output against float64 numpy."""
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    assert len(got) == len(ROW_COUNTS)
    for m, g in zip(ROW_COUNTS, got):
        want = np.maximum(feeds[f"a{m}"].astype(np.float64) @ w["w"] + w["bias"] + feeds[f"r{m}"], 0.0)
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=f"{m} rows, {what}")


def test_every_row_remainder_with_its_epilogue_matches_numpy():
    model, feeds = row_tails_model(), row_tails_feeds()
    for threads in (1, 2):
        options = onnxc.SessionOptions()
        options.intra_op_num_threads = threads
        assert_row_tails(model, feeds, run_onnxc(model, feeds, sess_options=options), f"{threads} threads")


# A Linear layer against one row (compiler/ops/gemm.py AS_IS_BYTES): weights of 4.4 MB, read as
# they are by onnxc_sgemm_few_rows's dot products, four columns at a time (N = 1003: three
# columns left) over vectors of k (K = 1101: a tail of k for every vector width); a small B
# given as an input, transposed, through the same kernel; and B given as an input as it is, its
# rows contiguous (a decoder's attention weights times its value cache): four vectors of C's row
# at a time over the whole of k, then single vectors, then the last columns (N = 107: each of
# the three for 16-, 8- and 4-lane vectors), with and without a bias added first.
LINEAR_K, LINEAR_N, SMALL_K, SMALL_N, ROWS_N = 1101, 1003, 37, 7, 107


def linear_model(rows: int = 1) -> onnx.ModelProto:
    rng = np.random.default_rng(13)
    w = (rng.standard_normal((LINEAR_N, LINEAR_K)) / np.sqrt(LINEAR_K)).astype(np.float32)
    b = rng.standard_normal(LINEAR_N).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"]),
             helper.make_node("Gemm", ["s", "v"], ["z"], transB=1), helper.make_node("MatMul", ["s", "u"], ["p"]),
             helper.make_node("Gemm", ["s", "u", "c"], ["q"], beta=0.5)]
    return make_model(nodes, [("x", T.FLOAT, [rows, LINEAR_K]), ("s", T.FLOAT, [rows, SMALL_K]),
                              ("v", T.FLOAT, [SMALL_N, SMALL_K]), ("u", T.FLOAT, [SMALL_K, ROWS_N]),
                              ("c", T.FLOAT, [ROWS_N])],
                      [("y", T.FLOAT, [rows, LINEAR_N]), ("z", T.FLOAT, [rows, SMALL_N]),
                       ("p", T.FLOAT, [rows, ROWS_N]), ("q", T.FLOAT, [rows, ROWS_N])],
                      [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], opset=17)


def linear_feeds(rows: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(14)
    return {"x": rng.standard_normal((rows, LINEAR_K)).astype(np.float32),
            "s": rng.standard_normal((rows, SMALL_K)).astype(np.float32),
            "v": rng.standard_normal((SMALL_N, SMALL_K)).astype(np.float32),
            "u": rng.standard_normal((SMALL_K, ROWS_N)).astype(np.float32),
            "c": rng.standard_normal(ROWS_N).astype(np.float32)}


def linear_expected(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs in float64 numpy."""
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    y = feeds["x"].astype(np.float64) @ w["w"].T + w["b"]
    s, u = feeds["s"].astype(np.float64), feeds["u"].astype(np.float64)
    return [np.maximum(y, 0), s @ feeds["v"].astype(np.float64).T, s @ u, s @ u + 0.5 * feeds["c"].astype(np.float64)]


def assert_linear(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
