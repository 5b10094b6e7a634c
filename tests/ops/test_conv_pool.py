"""Conv, ConvTranspose, ConvInteger, DeformConv, CausalConvWithState and the pooling ops against
onnxruntime (or the ONNX reference implementation where onnxruntime has no kernel)."""
from __future__ import annotations

import os
import re
from fractions import Fraction

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from onnxc.compiler.ops import _winograd
from helpers import assert_matches_ort, assert_matches_ort_at_sizes, make_model, run_ort
from models import causal_conv

RNG = np.random.default_rng(7)


def randn(shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def node(op: str, inputs: list[str], output: str | list[str], **attrs):
    return helper.make_node(op, inputs, [output] if isinstance(output, str) else output, **attrs)


def assert_close(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float = 1e-4, atol: float = 1e-5):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} vs {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} vs {e.shape}"
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"output {i}")


def assert_matches_reference(model, feeds, rtol: float = 1e-4, atol: float = 1e-5):
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert_close(actual, [np.asarray(e) for e in expected], rtol, atol)


def assert_symbolic(model, feeds_list, rtol: float = 1e-4, atol: float = 1e-5):
    """One onnxc session run on several input sizes, each compared with onnxruntime."""
    sess = onnxc.InferenceSession(model.SerializeToString())
    for feeds in feeds_list:
        assert_close(sess.run(None, feeds), run_ort(model, feeds), rtol, atol)


# ---- Conv -------------------------------------------------------------------------------

CONV_2D = [  # (W shape, attrs, bias) over X [2, 4, 9, 8]
    ([6, 4, 3, 3], {"pads": [1, 1, 1, 1]}, True),
    ([6, 2, 3, 2], {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}, True),
    ([4, 1, 3, 3], {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}, True),
    ([5, 4, 2, 2], {"auto_pad": "SAME_LOWER", "strides": [2, 3]}, False),
    ([5, 4, 3, 2], {"auto_pad": "VALID", "strides": [1, 2]}, True),
    ([8, 4, 1, 1], {}, False),
    ([8, 4, 1, 1], {"strides": [2, 2]}, True),
    ([3, 4, 4, 3], {"kernel_shape": [4, 3], "pads": [2, 0, 0, 1], "dilations": [2, 2]}, True),
]


def test_conv_2d_variants():
    x = randn([2, 4, 9, 8])
    nodes, inputs, outputs, feeds = [], [("X", TP.FLOAT, x.shape)], [], {"X": x}
    for i, (wshape, attrs, bias) in enumerate(CONV_2D):
        feeds[f"W{i}"] = randn(wshape)
        inputs.append((f"W{i}", TP.FLOAT, wshape))
        names = ["X", f"W{i}"]
        if bias:
            feeds[f"B{i}"] = randn([wshape[0]])
            inputs.append((f"B{i}", TP.FLOAT, [wshape[0]]))
            names.append(f"B{i}")
        nodes.append(node("Conv", names, f"Y{i}", **attrs))
        outputs.append((f"Y{i}", TP.FLOAT, [None] * 4))
    assert_matches_ort(make_model(nodes, inputs, outputs), feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xshape, wshape, attrs", [
    ([2, 3, 11], [4, 3, 3], {"pads": [2, 1], "strides": [2]}),
    ([1, 4, 12], [4, 2, 5], {"group": 2, "dilations": [2], "pads": [3, 1]}),
    ([1, 4, 12], [4, 4, 4], {"auto_pad": "SAME_UPPER", "strides": [3]}),
    ([1, 2, 5, 6, 7], [3, 2, 2, 3, 2], {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}),
    ([2, 3, 10], [3, 1, 3], {"group": 3, "pads": [1, 1], "strides": [2]}),
    ([1, 2, 4, 5, 6], [2, 1, 2, 2, 3], {"group": 2, "pads": [1, 0, 1, 0, 1, 1], "dilations": [1, 2, 1]}),
])
def test_conv_1d_3d(xshape, wshape, attrs):
    model = make_model([node("Conv", ["X", "W", "B"], "Y", **attrs)],
                       [("X", TP.FLOAT, xshape), ("W", TP.FLOAT, wshape), ("B", TP.FLOAT, [wshape[0]])],
                       [("Y", TP.FLOAT, [None] * len(xshape))])
    assert_matches_ort(model, {"X": randn(xshape), "W": randn(wshape), "B": randn([wshape[0]])}, atol=1e-4)


DEPTHWISE = [  # (X shape, kernel, attrs) of float32 2-D depthwise convolutions
    ([2, 5, 7, 7], [3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 6, 14, 13], [3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ([1, 3, 12, 11], [5, 5], {"pads": [2, 1, 0, 2], "dilations": [2, 1]}),
    ([1, 4, 9, 10], [3, 2], {"strides": [1, 3], "pads": [0, 1, 2, 0]}),
    ([1, 4, 8, 8], [3, 3], {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ([1, 2, 6, 6], [7, 7], {"pads": [3, 3, 3, 3]}),
    ([1, 64, 24, 24], [3, 3], {"pads": [1, 1, 1, 1]}),   # enough work to run on the threads
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xshape, kernel, attrs", DEPTHWISE)
def test_depthwise_conv(xshape, kernel, attrs, threads):
    """One channel per group, alone and with a fused residual and ReLU (EXTENDED level)."""
    c = xshape[1]
    w, b = randn([c, 1, *kernel]), randn([c])
    conv = node("Conv", ["X", "W", "B"], "C", group=c, **attrs)
    plain = make_model([conv], [("X", TP.FLOAT, xshape), ("W", TP.FLOAT, w.shape), ("B", TP.FLOAT, [c])],
                       [("C", TP.FLOAT, [None] * 4)])
    x = randn(xshape)
    (y,) = run_ort(plain, {"X": x, "W": w, "B": b})
    fused = make_model([conv, node("Add", ["C", "Z"], "S"), node("Relu", ["S"], "Y")],
                       [("X", TP.FLOAT, xshape), ("Z", TP.FLOAT, y.shape)], [("Y", TP.FLOAT, [None] * 4)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, [c], b)])
    z = randn(y.shape)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    got = onnxc.InferenceSession(plain.SerializeToString(), so).run(None, {"X": x, "W": w, "B": b})
    assert_close(got, [y], atol=1e-4)
    got = onnxc.InferenceSession(fused.SerializeToString(), so).run(None, {"X": x, "Z": z})
    assert_close(got, [np.maximum(y + z, 0)], atol=1e-4)


@pytest.mark.parametrize("act, attrs, inline", [
    ("Relu", {}, True), ("Clip", {}, True), ("LeakyRelu", {"alpha": 0.2}, True), ("HardSigmoid", {}, True),
    ("HardSwish", {}, True), ("Sigmoid", {}, False)])
@pytest.mark.parametrize("size", [32, 7])
def test_depthwise_activations_applied_as_rows_are_stored(act, attrs, inline, size):
    """Where a depthwise Conv writes its rows straight into Y (rows of whole vectors: 32 wide)
    without a residual, a fused activation that is a select or two is applied to each block of
    rows as it is computed, with no second pass over the channel; others (Sigmoid) and small maps
    (7 wide, through a row buffer) keep the pass. Each matches onnxruntime's Conv then activation."""
    c = 24
    w, b = randn([c, 1, 3, 3]), randn([c])
    inputs = ["C"] + (["lo", "hi"] if act == "Clip" else [])
    nodes = [node("Conv", ["X", "W", "B"], "C", group=c, pads=[1, 1, 1, 1]), node(act, inputs, "Y", **attrs)]
    inits = [helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()), helper.make_tensor("B", TP.FLOAT, [c], b)]
    if act == "Clip":
        inits += [helper.make_tensor("lo", TP.FLOAT, [], [-0.5]), helper.make_tensor("hi", TP.FLOAT, [], [0.75])]
    model = make_model(nodes, [("X", TP.FLOAT, [1, c, size, size])], [("Y", TP.FLOAT, [1, c, size, size])], inits)
    x = {"X": randn([1, c, size, size]) * 3}
    sess = onnxc.InferenceSession(model.SerializeToString())
    assert_close(sess.run(None, x), run_ort(model, x), atol=1e-5)
    source = open(os.path.join(sess.artifact_dir, "model.c")).read()
    assert ("onnxc_epilogue_tile(&epi" not in source) == (inline and size == 32)


def test_depthwise_rows_in_blocks_are_bit_identical_to_one_row_at_a_time(tmp_path, monkeypatch):
    """The depthwise kernel computes several output rows at once (sharing their plane loads),
    each output's taps in the kernel's order: the same bits as one row at a time, for 3x3 and
    5x5 kernels, strides 1 and 2, rows that do not fill the last block and rows narrower than
    a vector."""
    from onnxc.compiler.ops import conv as conv_op
    from onnxc.driver import CompileOptions
    cases = [([1, 8, 11, 11], [3, 3], [1, 1]), ([1, 8, 14, 14], [5, 5], [2, 2]), ([1, 6, 7, 7], [5, 5], [1, 1]),
             ([1, 4, 30, 21], [3, 3], [2, 2])]
    nodes, inputs, outputs, inits, feed = [], [], [], [], {}
    for i, (xshape, kernel, strides) in enumerate(cases):
        c = xshape[1]
        inits += [helper.make_tensor(f"W{i}", TP.FLOAT, [c, 1, *kernel], randn([c, 1, *kernel]).ravel()),
                  helper.make_tensor(f"B{i}", TP.FLOAT, [c], randn([c]))]
        nodes.append(node("Conv", [f"X{i}", f"W{i}", f"B{i}"], f"Y{i}", group=c, strides=strides,
                          pads=[kernel[0] // 2] * 4))
        inputs.append((f"X{i}", TP.FLOAT, xshape))
        outputs.append((f"Y{i}", TP.FLOAT, [None] * 4))
        feed[f"X{i}"] = randn(xshape)
    model = make_model(nodes, inputs, outputs, initializers=inits)
    results = []
    for rows in (1, conv_op.DEPTHWISE_BLOCK_ROWS):
        monkeypatch.setattr(conv_op, "DEPTHWISE_BLOCK_ROWS", rows)
        onnxc.compile_model(model, str(tmp_path / f"rows{rows}"), CompileOptions(threads=1))
        source = "".join(f.read_text() for f in (tmp_path / f"rows{rows}").glob("model*.c"))
        assert source.count("float acc") >= len(cases) * (rows if rows > 1 else 1)
        results.append(onnxc.InferenceSession(str(tmp_path / f"rows{rows}")).run(None, feed))
    for one, blocked, want in zip(*results, run_ort(model, feed)):
        np.testing.assert_array_equal(blocked, one)
        np.testing.assert_allclose(blocked, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xshape, wshape, attrs", [
    ([1, 128, 28, 28], [128, 16, 3, 3], {"group": 8, "pads": [1, 1, 1, 1]}),   # im2col per group
    ([2, 136, 28, 28], [272, 34, 1, 1], {"group": 4}),                         # 1x1, two images
])
def test_grouped_conv_groups_side_by_side(xshape, wshape, attrs, threads):
    """Groups whose GEMMs are too small to split run on the threads with their own scratch."""
    w, b = randn(wshape) * 0.1, randn([wshape[0]])
    conv = node("Conv", ["X", "W", "B"], "Y", **attrs)
    model = make_model([conv, node("Relu", ["Y"], "R")], [("X", TP.FLOAT, xshape)], [("R", TP.FLOAT, [None] * 4)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    x = randn(xshape)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    got = onnxc.InferenceSession(model.SerializeToString(), so).run(None, {"X": x})
    assert_close(got, run_ort(model, {"X": x}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_conv_bands_side_by_side(threads):
    """A 3x3 convolution in four bands of 10 output rows, which two threads take two each, with
    their own im2col and packing buffers; the fused residual is offset for each band."""
    model, session, source = conv_residual_relu(randn([48, 32, 3, 3]) * 0.1, [1, 32, 40, 40], [1, 48, 40, 40],
                                                threads, pads=[1, 1, 1, 1])
    assert ("bands_parallel" in source) == (threads > 1)
    feed = {"X": randn([1, 32, 40, 40]), "Z": randn([1, 48, 40, 40])}
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


def test_a_map_of_few_weights_takes_a_band_per_thread():
    """A 1x1 stride-2 convolution of 256 -> 128 channels onto 14 x 14 (196 positions: one band
    of at most 512 at one thread) with 128 KiB of weights: at two threads a band of 7 rows each,
    a thread's im2col rows read by its own GEMM. The same bits as one thread (each product sums
    in the same order whichever band has it), and onnxruntime's values."""
    w, b = randn([128, 256, 1, 1]) * 0.1, randn([128])
    model = make_model([node("Conv", ["X", "W", "B"], "C", strides=[2, 2]), node("Relu", ["C"], "Y")],
                       [("X", TP.FLOAT, [1, 256, 28, 28])], [("Y", TP.FLOAT, [None] * 4)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    feed = {"X": randn([1, 256, 28, 28])}
    results = []
    for threads, rows in ((1, 14), (2, 7)):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.min_threaded_work", "0")   # (a threaded build of one node)
        session = onnxc.InferenceSession(model.SerializeToString(), so)
        with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
            source = f.read()
        assert f"first < 14; first += {rows})" in source, threads
        assert ("bands_parallel" in source) == (threads > 1)
        results.append(session.run(None, feed)[0])
    np.testing.assert_array_equal(results[0], results[1])
    assert_close(results[1:], run_ort(model, feed), rtol=1e-4, atol=1e-4)


AVX2_MARCH = "x86-64-v3"


def conv_residual_relu(w, x_shape, y_shape, threads, disabled=("conv_winograd", "conv_direct"), **attrs):
    """Relu(Conv(X, W, B) + Z) with constant W and B: (model, session, generated source),
    compiled for AVX2 without the lowering choices in ``disabled``."""
    b = randn([w.shape[0]])
    model = make_model([node("Conv", ["X", "W", "B"], "C", **attrs), node("Add", ["C", "Z"], "S"),
                        node("Relu", ["S"], "Y")],
                       [("X", TP.FLOAT, x_shape), ("Z", TP.FLOAT, y_shape)], [("Y", TP.FLOAT, [None] * 4)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    # the lowering choices asserted are the AVX2 cost model's (6 x 16 GEMM tiles): fixed, so
    # that the tests hold on AVX-512 machines too, whose 12 x 32 tiles choose otherwise
    so.add_session_config_entry("session.onnxc.march", AVX2_MARCH)
    session = onnxc.InferenceSession(model.SerializeToString(), so, disabled_optimizers=list(disabled))
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        return model, session, f.read()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ([1, 8, 9, 11], [12, 8, 3, 3], {"pads": [1, 1, 1, 1]}),
    ([1, 6, 10, 13], [8, 6, 5, 5], {"pads": [2, 4, 2, 4], "dilations": [1, 2]}),
    ([1, 5, 7, 9], [7, 5, 3, 3], {"pads": [0, 1, 2, 1]}),                 # rows padded unevenly
    ([2, 5, 5, 19], [6, 5, 7, 7], {"pads": [3, 3, 3, 3]}),                # a kernel larger than the map
    ([1, 4, 6, 10], [5, 4, 1, 7], {"pads": [0, 3, 0, 3]}),
    ([1, 3, 12, 21], [4, 3, 2, 2], {"auto_pad": "SAME_UPPER"}),
    ([1, 32, 40, 37], [48, 32, 3, 3], {"pads": [1, 1, 1, 1]}),             # in bands of output rows
])
def test_a_same_conv_of_stride_1_copies_each_tap_as_one_shifted_run(threads, x_shape, w_shape, attrs):
    """Stride 1 and output rows as long as the input's: each tap's rows of im2col are one
    shifted copy of the input's rows, with the columns brought in from a neighbouring row and
    the rows outside the input zeroed (twice: the buffer keeps the first run's values)."""
    model, session, source = conv_residual_relu(randn(w_shape) * 0.3, x_shape,
                                                [x_shape[0], w_shape[0], *x_shape[2:]], threads, **attrs)
    assert "from a neighbouring row" in source
    for _ in range(2):
        feed = {"X": randn(x_shape), "Z": randn([x_shape[0], w_shape[0], *x_shape[2:]])}
        assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("attrs, size", [
    ({"pads": [1, 1, 1, 1]}, 16),                              # output rows of one panel
    ({"pads": [1, 1, 1, 1]}, 48),                              # of three, split among threads
    ({"pads": [1, 0, 1, 2], "strides": [2, 2]}, 63),           # four phase planes, uneven pads
    ({"pads": [2, 2, 2, 2], "dilations": [2, 2], "group": 2}, 32),
])
def test_conv_gathers_its_gemm_input_from_planes(threads, attrs, size):
    """A small 3x3 convolution whose output rows are whole GEMM panels packs B straight from
    phase planes of the input (no im2col); the fused residual and activation still apply
    to each tile, at the right place whichever thread computes it."""
    dilation, stride = attrs.get("dilations", [1])[0], attrs.get("strides", [1])[0]
    oh, ow = ((size + sum(attrs["pads"][axis::2]) - 2 * dilation - 1) // stride + 1 for axis in (0, 1))
    model, session, source = conv_residual_relu(randn([24, 8 // attrs.get("group", 1), 3, 3]) * 0.3,
                                                [2, 8, size, size], [2, 24, oh, ow], threads, **attrs)
    assert "&gather," in source
    feed = {"X": randn([2, 8, size, size]), "Z": randn([2, 24, oh, ow])}
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)   # borders still zero


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", [45, 230])
def test_a_first_7x7_conv_of_an_image_gathers_from_planes_whatever_its_width(threads, size):
    """A network's first convolution (3 channels, 7x7, stride 2) gathers B from the image's
    planes although its output rows (23 or 115 columns) are no whole GEMM panels, which are
    then copied in pieces across row ends, and the planes are larger than the cache-sized
    limit of other convolutions (at 230x230)."""
    out = (size + 6 - 7) // 2 + 1
    model, session, source = conv_residual_relu(randn([16, 3, 7, 7]) * 0.3, [2, 3, size, size], [2, 16, out, out],
                                                threads, pads=[3, 3, 3, 3], strides=[2, 2])
    assert "&gather," in source
    feed = {"X": randn([2, 3, size, size]), "Z": randn([2, 16, out, out])}
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)   # borders still zero


@pytest.mark.parametrize("m", _winograd.TILES)
def test_winograd_matrices_compute_the_correlation_exactly(m):
    """In exact arithmetic A^T [(G g G^T) . (B^T d B)] A is the m x m valid correlation of a
    (m + 2) x (m + 2) tile d with a 3x3 filter g, and the generated 1-D transforms are B^T x
    and A^T x."""
    wg = _winograd.winograd(m)
    rng = np.random.default_rng(m)
    d = [[Fraction(int(v)) for v in row] for row in rng.integers(-9, 10, (wg.alpha, wg.alpha))]
    g = [[Fraction(int(v)) for v in row] for row in rng.integers(-9, 10, (3, 3))]

    def mul(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    def t(a):
        return [list(col) for col in zip(*a)]

    u, v = mul(mul(wg.G, g), t(wg.G)), mul(mul(wg.BT, d), t(wg.BT))
    y = mul(mul(wg.AT, [[u[i][j] * v[i][j] for j in range(wg.alpha)] for i in range(wg.alpha)]), t(wg.AT))
    assert y == [[sum(d[i + a][j + b] * g[a][b] for a in range(3) for b in range(3)) for j in range(m)]
                 for i in range(m)]
    x = rng.integers(-9, 10, wg.alpha)
    scope = {f"x{k}": float(v) for k, v in enumerate(x)}
    code = _winograd.transform_code(wg)
    for name, mat in (("input", wg.BT), ("output", wg.AT)):
        got = [eval(re.sub(r"(\d)f\b", r"\1", e), {}, scope) for e in code[name]]
        assert got == [float(sum(c * int(v) for c, v in zip(row, x))) for row in mat]


# F(4x4) rounds to about 3e-6 of the outputs' magnitude (F(2x2) to less): compared with
# onnxruntime at 1e-5 of it, not at the 1e-5 absolute of the other convolution tests.
WINOGRAD_ATOL = 1e-5


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels, size, pads, tile, gathered, split", [
    ((16, 24), (48, 48), [1, 1, 1, 1], 4, False, False),   # phase-plane positions; 2 blocks at 2 threads
    ((32, 32), (60, 56), [1, 1, 1, 1], 4, False, False),   # 4 blocks, the last of 3 tile rows: 2 a thread, 1 or 2 of 3
    ((16, 24), (16, 13), [0, 2, 1, 0], 4, True, False),    # uneven pads, partial tiles at both edges
    ((32, 64), (8, 8), [1, 1, 1, 1], 2, True, False),      # F(2x2)
    ((64, 100), (8, 8), [1, 1, 1, 1], 2, True, True),      # one block: 2 threads share its 100 channels
])
def test_conv_winograd(threads, channels, size, pads, tile, gathered, split):
    """3x3 stride-1 convolutions by Winograd's algorithm, batch 2, with a fused bias, residual
    and Relu: F(4x4) and F(2x2), the GEMM's columns read from the positions of the phase
    planes or gathered tile by tile, partial tiles at the right and bottom edges, and blocks
    of tile rows on two threads, each writing only its own block's outputs, or one block
    whose output channels the two threads share (a count that is no multiple of the GEMM's
    row panels). Blocks on threads read planes of their own thread, which fills them with
    the rows its blocks read. Without the conv_winograd lowering the same convolution takes
    im2col."""
    (c, k), (h, w) = channels, size
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    weights = randn([k, c, 3, 3]) * 0.3
    model, session, source = conv_residual_relu(weights, [2, c, h, w], [2, k, oh, ow], threads,
                                                disabled=("conv_direct",), pads=pads)
    assert f"Winograd's F({tile}x{tile}, 3x3)" in source
    assert ("GEMM columns each: the tiles, gathered" in source) == gathered
    assert ("each thread: every block, for its share of the output channels" in source) == (split and threads > 1)
    blocks = int(re.search(r"Winograd's F\(\dx\d, 3x3\): (\d+) block", source).group(1))
    assert ("from planes of its own" in source) == (threads > 1 and not split and blocks > 1)
    feed = {"X": randn([2, c, h, w]), "Z": randn([2, k, oh, ow])}
    expected = run_ort(model, feed)
    assert_close(session.run(None, feed), expected, rtol=0, atol=WINOGRAD_ATOL * np.abs(expected[0]).max())
    assert_close(session.run(None, feed), expected, rtol=0, atol=WINOGRAD_ATOL * np.abs(expected[0]).max())
    _, _, im2col = conv_residual_relu(weights, [2, c, h, w], [2, k, oh, ow], threads, pads=pads)
    assert "Winograd" not in im2col


def test_winograd_blocks_on_three_threads_read_planes_of_their_own_thread():
    """3 blocks of tile rows on 3 threads, each filling planes of its own with the rows its
    block reads (and zeros past them, which the positions after a block's last tile read):
    the middle thread's rows start and end inside the planes. Batch 2."""
    weights = randn([32, 32, 3, 3]) * 0.3
    model, session, source = conv_residual_relu(weights, [2, 32, 60, 56], [2, 32, 60, 56], 3,
                                                disabled=("conv_direct",), pads=[1, 1, 1, 1])
    assert "Winograd's F(4x4, 3x3): 3 block(s) of 5 tile rows" in source
    assert "from planes of its own" in source
    feed = {"X": randn([2, 32, 60, 56]), "Z": randn([2, 32, 60, 56])}
    expected = run_ort(model, feed)
    for _ in range(2):
        assert_close(session.run(None, feed), expected, rtol=0, atol=WINOGRAD_ATOL * np.abs(expected[0]).max())


@pytest.mark.parametrize("threads", [2, 3])
def test_winograd_blocks_left_over_are_shared_by_every_thread(threads):
    """A block count that is no multiple of the threads (48 -> 36 channels over 52 x 52: 7
    blocks of tile rows with AVX-512's GEMM tiles, 13 with AVX2's): each thread takes as many
    whole blocks, and every thread a share of the output channels of the blocks left over,
    filling its own planes with the rows of both. Batch 2, run twice (later images rewrite
    the planes' middles only)."""
    weights = randn([36, 48, 3, 3]) * 0.3
    model, session, source = conv_residual_relu(weights, [2, 48, 52, 52], [2, 36, 52, 52], threads,
                                                disabled=("conv_direct",), pads=[1, 1, 1, 1])
    blocks = int(re.search(r"Winograd's F\(\dx\d, 3x3\): (\d+) block", source).group(1))
    assert blocks % threads and "from planes of its own" in source
    feed = {"X": randn([2, 48, 52, 52]), "Z": randn([2, 36, 52, 52])}
    expected = run_ort(model, feed)
    for _ in range(2):
        assert_close(session.run(None, feed), expected, rtol=0, atol=WINOGRAD_ATOL * np.abs(expected[0]).max())


@pytest.mark.parametrize("threads, channels, patches", [(1, 512, True), (2, 512, False), (1, 128, False)])
def test_a_wide_1x1_conv_of_a_small_map_puts_the_positions_in_the_gemm_rows_on_one_thread(threads, channels, patches):
    """A 1x1 Conv of a 7 x 7 map (49 positions, a fifth of im2col's columns padding) with 512
    output channels or more takes the positions-as-rows kernel in a 1-thread build (W^T's panels
    streamed once per block of positions); with fewer channels or more threads, W times X as it
    is. Either way onnxruntime's values, the bias and ReLU applied."""
    w, b = randn([channels, 96, 1, 1]) * 0.3, randn([channels])
    model = make_model([node("Conv", ["X", "W", "B"], "C"), node("Relu", ["C"], "Y")], [("X", TP.FLOAT, [1, 96, 7, 7])],
                       [("Y", TP.FLOAT, [1, channels, 7, 7])],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    session = onnxc.InferenceSession(model.SerializeToString(), so)
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        assert ("scratch_patches" in f.read()) == patches
    feed = {"X": randn([1, 96, 7, 7])}
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, "2, every loop split"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    (["batch", 129, 4], [128, 129, 3], {"pads": [1, 1]}),                  # silero's encoder: 4 positions, padding
    (["batch", 1, 640], [66, 1, 256], {"strides": [128]}),                 # an STFT as a convolution, no padding
    ([50, 16, 7, 7], [40, 16, 3, 3], {"strides": [4, 4], "pads": [1, 1, 1, 1]}),   # 2x2 maps, blocks of 24 images
    ([3, 8, 5, 4, 4], [12, 8, 3, 2, 2], {"strides": [2, 2, 2], "pads": [1, 0, 1, 0, 0, 0]}),  # 3-D
    ([5, 6, 3, 3], [9, 6, 3, 3], {"auto_pad": "VALID"}),                   # one position of a 3x3 kernel
    ([2, 24, 7, 7], [40, 24, 5, 5], {"pads": [2, 2, 2, 2]}),               # 49 positions: im2col's GEMM computes 64
    ([2, 16, 9, 9], [24, 16, 3, 3], {"pads": [1, 1, 1, 1]}),               # 81 positions: im2col's computes 96
    ([3, 16, 6, 6], [20, 16, 2, 2], {}),                                   # 25 positions of 32
])
def test_conv_of_small_maps_puts_the_positions_in_the_gemm_rows(threads, x_shape, w_shape, attrs, tmp_path):
    """A map of fewer positions than half a GEMM tile's width, or of so many that a fifth of W
    times im2col's columns would be padding: the images' positions become the GEMM's rows and
    the output channels its columns (Y^T = patches W^T), blocks of images at a time, written
    back to Y's layout; the fused residual and activation land where they belong."""
    w = randn(w_shape) * 0.3
    rank = len(w_shape) - 2
    batch = 32 if x_shape[0] == "batch" else x_shape[0]
    x = randn([batch, *x_shape[1:]])
    out = [m for m in run_ort(make_model([node("Conv", ["X", "W"], "Y", **attrs)], [("X", TP.FLOAT, x.shape)],
                                         [("Y", TP.FLOAT, [None] * (rank + 2))],
                                         initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel())]),
                                 {"X": x})][0].shape
    b = randn([w_shape[0]])
    model = make_model([node("Conv", ["X", "W", "B"], "C", **attrs), node("Add", ["C", "Z"], "S"),
                        node("Relu", ["S"], "Y")],
                       [("X", TP.FLOAT, x_shape), ("Z", TP.FLOAT, [x_shape[0], *out[1:]])],
                       [("Y", TP.FLOAT, [None] * (rank + 2))],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    if isinstance(threads, int):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.onnxc.march", AVX2_MARCH)   # 16-column tiles: maps of up to 8 positions
        # (small: computed directly unless that lowering is off)
        session = onnxc.InferenceSession(model.SerializeToString(), so, disabled_optimizers=["conv_direct"])
    else:   # (the patches, the GEMM and the write-back each split between the threads, however small)
        folder = str(tmp_path / "model")
        onnxc.compile_model(model.SerializeToString(), folder, onnxc.CompileOptions(
            threads=2, march=AVX2_MARCH, min_threaded_work=0, disabled_passes=("conv_direct",),
            extra_cflags=("-DONNXC_PARALLEL_MIN_WORK=1", "-DONNXC_PARALLEL_MIN_MACS=1")))
        session = onnxc.InferenceSession(folder)
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        assert "scratch_patches" in f.read()
    for n in (batch, 1) if x_shape[0] == "batch" else (batch,):   # (a free batch: any count of blocks)
        feed = {"X": x[:n], "Z": randn([n, *out[1:]])}
        assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("x_shape, w_shape, region", [
    ([1, 128, 7, 7], [32, 128, 3, 3], True),     # DenseNet-121's last block: one column panel of 32
    ([5, 64, 2, 2], [40, 64, 3, 3], True),       # 20 rows over 5 images: panels cross images
    ([2, 256, 3, 3], [160, 256, 3, 3], False),   # W^T of 1.5 MB: the GEMM's own split, by columns
])
def test_small_map_blocks_split_whole_panels_of_rows_between_threads(threads, x_shape, w_shape, region):
    """Where the GEMM of a small map's block would split its rows anyway, or every thread may
    read all of W^T, each thread writes the patches of whole panels of rows, multiplies them and
    writes their outputs back, in one region; else the three loops split one after another.
    Either way the 1-thread build's bits (each output sums its K terms in the same order) and
    onnxruntime's values, the bias, residual and ReLU applied."""
    w = randn(w_shape) * 0.1
    y_shape = [x_shape[0], w_shape[0], *x_shape[2:]]
    model, single, source = conv_residual_relu(w, x_shape, y_shape, 1, disabled=("conv_direct", "conv_winograd"),
                                               pads=[1, 1, 1, 1])
    assert "scratch_patches" in source
    # (threaded however small: a model this small would otherwise run on one thread)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.onnxc.march", AVX2_MARCH)
    so.add_session_config_entry("session.onnxc.min_threaded_work", "0")
    session = onnxc.InferenceSession(model.SerializeToString(), so, disabled_optimizers=["conv_direct", "conv_winograd"])
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        assert ("each thread takes whole panels of rows" in f.read().lower()) == region
    feed = {"X": randn(x_shape), "Z": randn(y_shape)}
    expected = single.run(None, feed)
    for _ in range(2):
        got = session.run(None, feed)
        np.testing.assert_array_equal(got[0], expected[0])
    assert_close(got, run_ort(model, feed), atol=1e-4)


def conv_add_relu(x_shape, w_shape, attrs):
    """Relu(Conv(X, W, B) + Z) with random constant W and B, X of x_shape (a "batch" first dim:
    free, 3 images fed): (model, X fed, Y's shape)."""
    w, b = randn(w_shape) * 0.3, randn([w_shape[0]])
    batch = 3 if x_shape[0] == "batch" else x_shape[0]
    x = randn([batch, *x_shape[1:]])
    plain = make_model([node("Conv", ["X", "W"], "Y", **attrs)], [("X", TP.FLOAT, x.shape)], [("Y", TP.FLOAT, None)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel())])
    out = run_ort(plain, {"X": x})[0].shape
    model = make_model([node("Conv", ["X", "W", "B"], "C", **attrs), node("Add", ["C", "Z"], "S"),
                        node("Relu", ["S"], "Y")],
                       [("X", TP.FLOAT, x_shape), ("Z", TP.FLOAT, [x_shape[0], *out[1:]])],
                       [("Y", TP.FLOAT, [None] * 4)],
                       initializers=[helper.make_tensor("W", TP.FLOAT, w.shape, w.ravel()),
                                     helper.make_tensor("B", TP.FLOAT, b.shape, b)])
    return model, x, out


@pytest.mark.parametrize("threads, march, x_shape, w_shape, attrs", [
    (1, None, [2, 32, 9, 11], [32, 16, 3, 3], {"group": 2, "pads": [1, 1, 1, 1]}),
    (2, None, [1, 48, 14, 13], [48, 8, 3, 3], {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    (2, None, ["batch", 64, 7, 7], [64, 16, 3, 3], {"group": 4, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    (1, AVX2_MARCH, [1, 32, 10, 10], [32, 16, 3, 3], {"group": 2, "pads": [1, 0, 1, 2]}),
    (1, "x86-64", [1, 16, 7, 6], [16, 8, 3, 3], {"group": 2, "pads": [1, 1, 1, 1], "strides": [1, 2]}),
])
def test_grouped_conv_runs_blocks_of_output_channels_over_phase_planes(threads, march, x_shape, w_shape, attrs):
    """A grouped convolution of 8 or 16 output channels a group (RegNet's, ResNeXt's) computed
    directly: a block of output channels' sums in vector registers over the group's phase
    planes (portable loops where the target has no vectors), with bias, a fused residual and
    activation, strides, dilations, threads and a free batch."""
    model, x, out = conv_add_relu(x_shape, w_shape, attrs)
    batch = x.shape[0]
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    if march:
        so.add_session_config_entry("session.onnxc.march", march)
    session = onnxc.InferenceSession(model.SerializeToString(), so)
    source = "".join(open(os.path.join(session.artifact_dir, f), encoding="utf-8").read()
                     for f in os.listdir(session.artifact_dir) if f.endswith(".c"))
    assert "W_blocks" in source and "scratch_col" not in source   # the direct kernel, no im2col
    feed = {"X": x, "Z": randn([batch, *out[1:]])}
    assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


@pytest.mark.parametrize("threads, march, x_shape, w_shape, attrs, masked", [
    (1, None, [2, 16, 16, 16], [32, 16, 3, 3], {"pads": [1, 1, 1, 1]}, True),        # a CIFAR CNN's
    ("2, every loop split", None, ["batch", 16, 13, 11], [16, 16, 5, 5], {"pads": [2, 2, 2, 2]}, True),
    (2, None, [1, 32, 8, 8], [64, 32, 3, 3], {"pads": [1, 1, 1, 1]}, True),          # 4 blocks, 2 threads
    (1, AVX2_MARCH, [1, 8, 9, 10], [16, 8, 3, 3], {"pads": [0, 1, 2, 1]}, True),     # rows padded unevenly
    (1, None, [1, 16, 12, 12], [16, 16, 3, 3], {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, True),
    (1, None, [1, 16, 9, 9], [16, 16, 1, 7], {"pads": [0, 3, 0, 3]}, True),          # Inception's 1x7
    (1, None, [1, 24, 6, 6], [16, 24, 1, 3], {"pads": [0, 1, 0, 1]}, True),         # no shifted row
    (1, "x86-64", [1, 8, 6, 7], [16, 8, 3, 3], {"pads": [1, 1, 1, 1]}, True),        # portable loops
    (2, None, [1, 8, 20, 20], [16, 8, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, False),
])
def test_a_small_conv_of_one_group_is_computed_directly(threads, march, x_shape, w_shape, attrs, masked, tmp_path):
    """A one-group convolution too small for im2col and the GEMM to pay (or of a large kernel)
    takes the grouped kernel with one group: its planes copied once, blocks of output channels
    (and, for fewer blocks than threads, parts of their positions) on the threads. Of stride 1
    and rows as long as the input's, its vectors run over the output positions themselves,
    masks zeroing the columns a shifted tap brings in from the neighbouring row, the last
    partial vector stored apart; bias, fused residual and Relu, a free batch, onnxruntime's
    values. Without the conv_direct lowering im2col takes it."""
    model, x, out = conv_add_relu(x_shape, w_shape, attrs)
    batch = x.shape[0]

    def build(disabled):
        if isinstance(threads, int):
            so = onnxc.SessionOptions()
            so.intra_op_num_threads = threads
            if march:
                so.add_session_config_entry("session.onnxc.march", march)
            return onnxc.InferenceSession(model.SerializeToString(), so, disabled_optimizers=list(disabled))
        folder = str(tmp_path / f"model{len(disabled)}")   # (every block and part split, however small)
        onnxc.compile_model(model.SerializeToString(), folder, onnxc.CompileOptions(
            threads=2, min_threaded_work=0, disabled_passes=tuple(disabled),
            extra_cflags=("-DONNXC_PARALLEL_MIN_WORK=1", "-DONNXC_PARALLEL_MIN_MACS=1")))
        return onnxc.InferenceSession(folder)

    def source(session):
        return "".join(open(os.path.join(session.artifact_dir, f), encoding="utf-8").read()
                       for f in os.listdir(session.artifact_dir) if f.endswith(".c"))

    session = build(())
    code = source(session)
    assert "W_blocks" in code and "scratch_col" not in code   # the direct kernel, no im2col
    assert ("over the output positions q = oh * OW + ow themselves" in code) == masked
    for n in (batch, 1) if x_shape[0] == "batch" else (batch,):
        feed = {"X": x[:n], "Z": randn([n, *out[1:]])}
        assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)
        assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)   # borders still zero
    assert "W_blocks" not in source(build(("conv_direct", "conv_winograd")))


def test_conv_large_channels_use_gemm_tiles():
    x, w = randn([1, 24, 20, 19]), randn([37, 24, 3, 3])
    model = make_model([node("Conv", ["X", "W"], "Y", pads=[1, 1, 1, 1])],
                       [("X", TP.FLOAT, x.shape), ("W", TP.FLOAT, w.shape)], [("Y", TP.FLOAT, [None] * 4)])
    assert_matches_ort(model, {"X": x, "W": w}, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("elem, dtype", [(TP.DOUBLE, np.float64), (TP.FLOAT16, np.float16)])
def test_conv_other_float_types(elem, dtype):
    model = make_model([node("Conv", ["X", "W", "B"], "Y", pads=[1, 0, 1, 0], strides=[1, 2])],
                       [("X", elem, [1, 3, 6, 7]), ("W", elem, [4, 3, 3, 3]), ("B", elem, [4])],
                       [("Y", elem, [None] * 4)])
    feeds = {"X": randn([1, 3, 6, 7], dtype), "W": randn([4, 3, 3, 3], dtype), "B": randn([4], dtype)}
    assert_matches_reference(model, feeds, rtol=1e-2 if dtype == np.float16 else 1e-7, atol=1e-2)


def test_conv_symbolic_batch_and_spatial():
    w, b = randn([5, 3, 3, 3]), randn([5])
    model = make_model(
        [node("Conv", ["X", "W", "B"], "Y", pads=[1, 1, 1, 1], strides=[2, 2]),
         node("Conv", ["X", "W", "B"], "Z", auto_pad="SAME_LOWER", strides=[2, 3])],
        [("X", TP.FLOAT, ["N", 3, "H", "W"]), ("W", TP.FLOAT, w.shape), ("B", TP.FLOAT, [5])],
        [("Y", TP.FLOAT, ["N", 5, None, None]), ("Z", TP.FLOAT, ["N", 5, None, None])])
    assert_symbolic(model, [{"X": randn([2, 3, 9, 11]), "W": w, "B": b},
                            {"X": randn([1, 3, 5, 4]), "W": w, "B": b}], atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_planned_kernels_take_a_free_batch(threads):
    """Only the batch is a symbol (as exporters write a dynamic batch axis): the depthwise,
    gathered-GEMM, Winograd and pooling-plane kernels still plan for one image and loop over
    the batch, fused epilogues included; batches of 1 and 3 match onnxruntime."""
    rng = np.random.default_rng(3)
    inits = {"Wd": rng.standard_normal((8, 1, 5, 5)) * 0.2, "Bd": rng.standard_normal(8),
             "Wg": rng.standard_normal((24, 8, 3, 3)) * 0.1, "Ww": rng.standard_normal((24, 24, 3, 3)) * 0.1}
    model = make_model(
        [node("Conv", ["X", "Wd", "Bd"], "D", group=8, pads=[2, 2, 2, 2], strides=[2, 2]),
         node("HardSwish", ["D"], "A"),
         node("Conv", ["A", "Wg"], "G", pads=[1, 1, 1, 1], strides=[2, 2]),
         node("Relu", ["G"], "R"),
         node("Conv", ["R", "Ww"], "C", pads=[1, 1, 1, 1]),
         node("MaxPool", ["C"], "P", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         node("GlobalAveragePool", ["P"], "Y")],
        [("X", TP.FLOAT, ["batch", 8, 128, 128])], [("Y", TP.FLOAT, ["batch", 24, 1, 1])],
        initializers=[helper.make_tensor(k, TP.FLOAT, v.shape, v.astype(np.float32).ravel()) for k, v in inits.items()],
        opset=17)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.onnxc.march", AVX2_MARCH)   # the AVX2 cost model's choices
    # (the strided Conv is small enough to be computed directly: test_direct_conv's)
    session = onnxc.InferenceSession(model.SerializeToString(), so, disabled_optimizers=["conv_direct"])
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        source = f.read()
    assert "scratch_plane" in source, "depthwise / pooling planes"
    assert "&gather," in source, "gathered GEMM"
    assert "onnxc_winograd_f" in source, "Winograd"
    for batch in (1, 3):
        feed = {"X": randn([batch, 8, 128, 128])}
        assert_close(session.run(None, feed), run_ort(model, feed), atol=1e-4)


# ---- ConvTranspose -----------------------------------------------------------------------

CONV_TRANSPOSE = [  # (X shape, W shape, attrs)
    ([1, 2, 5, 5], [2, 3, 3, 3], {}),
    ([2, 4, 5, 6], [4, 2, 3, 2], {"group": 2, "strides": [2, 3], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}),
    ([1, 2, 5, 5], [2, 3, 4, 4], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ([1, 2, 5, 5], [2, 3, 4, 4], {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ([1, 2, 5, 5], [2, 3, 3, 3], {"strides": [2, 2], "output_shape": [10, 12]}),
    ([1, 2, 5, 5], [2, 3, 3, 3], {"strides": [2, 2], "dilations": [2, 1]}),
    ([1, 2, 7], [2, 3, 3], {"strides": [3], "pads": [1, 2]}),
]


@pytest.mark.parametrize("xshape, wshape, attrs", CONV_TRANSPOSE)
def test_conv_transpose(xshape, wshape, attrs):
    m = wshape[1] * attrs.get("group", 1)
    model = make_model([node("ConvTranspose", ["X", "W", "B"], "Y", **attrs)],
                       [("X", TP.FLOAT, xshape), ("W", TP.FLOAT, wshape), ("B", TP.FLOAT, [m])],
                       [("Y", TP.FLOAT, [None] * len(xshape))])
    assert_matches_ort(model, {"X": randn(xshape), "W": randn(wshape), "B": randn([m])}, atol=1e-4)


def test_conv_transpose_symbolic_and_float16():
    w = randn([2, 3, 3, 3])
    model = make_model([node("ConvTranspose", ["X", "W"], "Y", strides=[2, 2], pads=[1, 1, 1, 1]),
                        node("ConvTranspose", ["X", "W"], "Z", strides=[2, 2], output_shape=[9, 12])],
                       [("X", TP.FLOAT, ["N", 2, "H", "W"]), ("W", TP.FLOAT, w.shape)],
                       [("Y", TP.FLOAT, [None] * 4), ("Z", TP.FLOAT, [None] * 4)])
    assert_symbolic(model, [{"X": randn([2, 2, 4, 6]), "W": w}, {"X": randn([1, 2, 5, 5]), "W": w}], atol=1e-4)
    half = make_model([node("ConvTranspose", ["X", "W"], "Y", strides=[2, 1])],
                      [("X", TP.FLOAT16, [1, 2, 4, 5]), ("W", TP.FLOAT16, [2, 3, 3, 3])],
                      [("Y", TP.FLOAT16, [None] * 4)])
    assert_matches_reference(half, {"X": randn([1, 2, 4, 5], np.float16), "W": randn([2, 3, 3, 3], np.float16)},
                             rtol=1e-2, atol=1e-2)


# ---- ConvInteger -----------------------------------------------------------------------

def test_conv_integer():
    x = RNG.integers(0, 255, [1, 3, 7, 6]).astype(np.uint8)
    w = RNG.integers(0, 255, [4, 3, 3, 2]).astype(np.uint8)
    xz, wz = np.array([17], np.uint8), np.array([128], np.uint8)
    model = make_model([node("ConvInteger", ["x", "w", "xz", "wz"], "y", pads=[1, 1, 0, 1], strides=[2, 1])],
                       [("x", TP.UINT8, x.shape), ("w", TP.UINT8, w.shape), ("xz", TP.UINT8, [1]),
                        ("wz", TP.UINT8, [1])], [("y", TP.INT32, [None] * 4)])
    assert_matches_ort(model, {"x": x, "w": w, "xz": xz, "wz": wz})


def test_conv_integer_per_channel_int8():
    x = RNG.integers(-128, 127, [2, 4, 5, 5]).astype(np.int8)
    w = RNG.integers(-128, 127, [6, 2, 2, 2]).astype(np.int8)
    wz = RNG.integers(-5, 5, [6]).astype(np.int8)
    dw = RNG.integers(-128, 127, [4, 1, 3, 3]).astype(np.int8)
    dwz = RNG.integers(-5, 5, [4]).astype(np.int8)
    xz = np.array([3], np.int8)
    nodes = [node("ConvInteger", ["x", "w", "", "wz"], "y", group=2, auto_pad="SAME_UPPER"),
             node("ConvInteger", ["x", "dw", "xz", "dwz"], "z", group=4, pads=[1, 1, 1, 1], strides=[2, 1])]
    model = make_model(nodes, [("x", TP.INT8, x.shape), ("w", TP.INT8, w.shape), ("wz", TP.INT8, [6]),
                               ("dw", TP.INT8, dw.shape), ("xz", TP.INT8, [1]), ("dwz", TP.INT8, [4])],
                       [("y", TP.INT32, [None] * 4), ("z", TP.INT32, [None] * 4)])
    assert_matches_reference(model, {"x": x, "w": w, "wz": wz, "dw": dw, "xz": xz, "dwz": dwz})


# ---- pooling ------------------------------------------------------------------------------

POOLS = [  # (op, attrs) over X [2, 3, 9, 10]
    ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 0, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1,
                     "pads": [1, 0, 1, 0]}),
    ("AveragePool", {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 0, 0]}),
    ("LpPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "p": 2}),
    ("LpPool", {"kernel_shape": [2, 3], "strides": [1, 2], "p": 1}),
    ("LpPool", {"kernel_shape": [2, 2], "p": 3}),
    ("GlobalAveragePool", {}),
    ("GlobalMaxPool", {}),
    ("GlobalLpPool", {"p": 3}),
]


def test_pool_variants():
    x = randn([2, 3, 9, 10])
    nodes = [node(op, ["X"], f"Y{i}", **attrs) for i, (op, attrs) in enumerate(POOLS)]
    outputs = [(f"Y{i}", TP.FLOAT, [None] * 4) for i in range(len(POOLS))]
    assert_matches_ort(make_model(nodes, [("X", TP.FLOAT, x.shape)], outputs), {"X": x}, atol=1e-5)


def test_max_pool_indices():
    x = randn([2, 3, 7, 8])
    nodes = [node("MaxPool", ["X"], ["Y0", "I0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             node("MaxPool", ["X"], ["Y1", "I1"], kernel_shape=[2, 3], strides=[2, 1], storage_order=1)]
    outputs = [(n, t, [None] * 4) for n, t in (("Y0", TP.FLOAT), ("I0", TP.INT64), ("Y1", TP.FLOAT), ("I1", TP.INT64))]
    assert_matches_ort(make_model(nodes, [("X", TP.FLOAT, x.shape)], outputs), {"X": x})


@pytest.mark.parametrize("threads", [1, 2])
def test_large_pools_on_threads(threads):
    """Enough planes and window work that the planes run side by side on two threads."""
    x = randn([2, 64, 20, 20])
    nodes = [node("MaxPool", ["X"], ["Y0", "I0"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             node("AveragePool", ["X"], "Y1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             node("MaxPool", ["X"], "Y2", kernel_shape=[9, 9], pads=[4, 4, 4, 4])]
    outputs = [(n, t, [None] * 4) for n, t in (("Y0", TP.FLOAT), ("I0", TP.INT64), ("Y1", TP.FLOAT), ("Y2", TP.FLOAT))]
    model = make_model(nodes, [("X", TP.FLOAT, x.shape)], outputs)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    got = onnxc.InferenceSession(model.SerializeToString(), so).run(None, {"X": x})
    assert_close(got, run_ort(model, {"X": x}), atol=1e-5)


PLANE_POOLS = [  # (op, attrs, X shape) of float32 2-D pools over phase planes
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}, [1, 8, 17, 15]),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [2, 4, 16, 16]),
    ("MaxPool", {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}, [1, 40, 20, 20]),   # enough work for threads
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [3, 2], "dilations": [2, 3], "ceil_mode": 1}, [1, 3, 14, 13]),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, [1, 64, 14, 14]),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 2, 0, 1], "strides": [2, 3], "count_include_pad": 1},
     [1, 5, 11, 13]),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [1, 6, 10, 10]),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 0, 1, 0]}, [1, 3, 9, 10]),
    # maps whose planes would not stay in the first-level cache: row by row
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [1, 3, 112, 112]),
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [3, 2], "dilations": [2, 3], "ceil_mode": 1}, [1, 2, 121, 130]),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [1, 2, 160, 160]),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 2, 0, 1], "strides": [2, 3], "count_include_pad": 1},
     [1, 2, 131, 127]),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op, attrs, xshape", PLANE_POOLS)
def test_pools_over_phase_planes(op, attrs, xshape, threads):
    """The separable kernel over padded planes (row by row on large maps) against onnxruntime,
    with infinities in X, also with a symbolic batch; the generic loops serve the same pool with
    symbolic spatial sizes. With NaNs in X (where onnxruntime's max depends on where they fall)
    a max skips them in both kernels alike."""
    x = randn(xshape)
    x.flat[3::11], x.flat[5::13] = np.inf, -np.inf
    with_nans = x.copy()
    with_nans.flat[::7] = np.nan
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    results = []
    for dims, planes in ((xshape, True), (["N", *xshape[1:]], True), (["N", xshape[1], "H", "W"], False)):
        model = make_model([node(op, ["X"], "Y", **attrs)], [("X", TP.FLOAT, dims)], [("Y", TP.FLOAT, [None] * 4)])
        session = onnxc.InferenceSession(model.SerializeToString(), so)
        with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
            source = f.read()
        by_rows = xshape[2] * xshape[3] > 10000
        assert ("over phase planes" in source) == (planes and not by_rows), dims
        assert ("row by row" in source) == (planes and by_rows), dims
        (expected,) = run_ort(model, {"X": x})
        np.testing.assert_allclose(session.run(None, {"X": x})[0], expected, rtol=1e-5, atol=1e-6)
        results.append(session.run(None, {"X": with_nans})[0])
    if op == "MaxPool":
        np.testing.assert_array_equal(results[0], results[2])
        np.testing.assert_array_equal(results[1], results[2])


@pytest.mark.parametrize("op, attrs, global_kernel", [
    ("AveragePool", {"kernel_shape": [7, 7]}, True),                           # a classifier's last pool
    ("AveragePool", {"kernel_shape": [7, 7], "strides": [2, 2], "count_include_pad": 1}, True),
    ("MaxPool", {"kernel_shape": [7, 7]}, True),
    ("AveragePool", {"kernel_shape": [7, 7], "pads": [1, 1, 0, 0]}, False),    # padded: 2 x 2 windows
    ("AveragePool", {"kernel_shape": [7, 6]}, False),                          # 1 x 2 windows
])
def test_a_window_over_the_whole_plane_takes_the_global_pool_kernel(op, attrs, global_kernel):
    """AveragePool or MaxPool whose one window covers each whole 7 x 7 plane, unpadded (ResNet
    exports from TensorFlow end in one), is built as GlobalAveragePool / GlobalMaxPool are (the
    planes' kernel computed every window position of each row first); values as onnxruntime's,
    with infinities, and NaNs skipped by the max as the windowed kernel skips them."""
    x = randn([2, 40, 7, 7])
    x.flat[3::11] = np.inf
    model = make_model([node(op, ["X"], "Y", **attrs)], [("X", TP.FLOAT, x.shape)], [("Y", TP.FLOAT, [None] * 4)])
    session = onnxc.InferenceSession(model.SerializeToString())
    with open(os.path.join(session.artifact_dir, "model.c"), encoding="utf-8") as f:
        source = f.read()
    assert ("Planes run side by side on the threads (each summed in the same order" in source) == global_kernel
    (expected,) = run_ort(model, {"X": x})
    np.testing.assert_allclose(session.run(None, {"X": x})[0], expected, rtol=1e-6, atol=1e-6)
    if op == "MaxPool":
        with_nans = x.copy()
        with_nans[0, 0] = np.nan
        with_nans[1, 1, 3, 4] = np.nan
        got = session.run(None, {"X": with_nans})[0]
        assert got[0, 0, 0, 0] == -np.inf and got[1, 1, 0, 0] == np.nanmax(with_nans[1, 1])


@pytest.mark.parametrize("elem, dtype", [(TP.INT8, np.int8), (TP.UINT8, np.uint8), (TP.FLOAT16, np.float16)])
def test_max_pool_types(elem, dtype):
    x = RNG.integers(-100 if dtype == np.int8 else 0, 100, [1, 2, 6, 7]).astype(dtype)
    model = make_model([node("MaxPool", ["X"], "Y", kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2])],
                       [("X", elem, x.shape)], [("Y", elem, [None] * 4)])
    assert_matches_ort(model, {"X": x})


@pytest.mark.parametrize("op, attrs, xshape", [
    ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, [2, 3, 11]),
    ("AveragePool", {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}, [1, 2, 4, 5, 6]),
    ("MaxPool", {"kernel_shape": [2, 2, 2], "dilations": [1, 2, 1], "ceil_mode": 1, "strides": [2, 2, 2]},
     [1, 2, 5, 6, 7]),
])
def test_pool_1d_3d(op, attrs, xshape):
    model = make_model([node(op, ["X"], "Y", **attrs)], [("X", TP.FLOAT, xshape)],
                       [("Y", TP.FLOAT, [None] * len(xshape))])
    assert_matches_ort(model, {"X": randn(xshape)})


def test_global_pools_double():
    x = randn([2, 3, 4, 5], np.float64)
    nodes = [node("GlobalAveragePool", ["X"], "A"), node("GlobalMaxPool", ["X"], "M"),
             node("GlobalLpPool", ["X"], "L", p=3)]
    model = make_model(nodes, [("X", TP.DOUBLE, x.shape)], [(n, TP.DOUBLE, [2, 3, 1, 1]) for n in "AML"])
    expected = [x.mean(axis=(2, 3), keepdims=True), x.max(axis=(2, 3), keepdims=True),
                (np.abs(x) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)]
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, {"X": x})
    assert_close(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", ["N", 2])
def test_squeeze_and_excitation_pool_and_scale_split_between_threads(batch):
    """Global pools' planes and broadcasting maps' rows (the Mul that scales each channel, a
    bias added over the last axis) run on the threads above the loop threshold (64K elements:
    144 x 28 x 28 per image), and with a static batch so does the NCHW to NHWC Transpose's tiles;
    a 2-thread build gives the same bits as a 1-thread one and matches onnxruntime, with a
    symbolic batch (a row's indices come from its number) and a static one."""
    c = 144
    nodes = [node("GlobalAveragePool", ["X"], "G"), node("Sigmoid", ["G"], "S"), node("Mul", ["S", "X"], "Y"),
             node("GlobalMaxPool", ["X"], "M"), node("Transpose", ["X"], "T", perm=[0, 2, 3, 1]),
             node("Add", ["T", "B"], "Z")]
    b = helper.make_tensor("B", TP.FLOAT, [c], randn([c]))
    model = make_model(nodes, [("X", TP.FLOAT, [batch, c, 28, 28])],
                       [("Y", TP.FLOAT, [batch, c, 28, 28]), ("G", TP.FLOAT, [batch, c, 1, 1]),
                        ("M", TP.FLOAT, [batch, c, 1, 1]), ("Z", TP.FLOAT, [batch, 28, 28, c])], [b])
    x = {"X": randn([2, c, 28, 28])}
    runs = []
    for threads in (1, 2):
        so = onnxc.SessionOptions()
        so.intra_op_num_threads = threads
        sess = onnxc.InferenceSession(model.SerializeToString(), so)
        runs.append(sess.run(None, x))
        if threads == 2:
            source = open(os.path.join(sess.artifact_dir, "model.c")).read()
            bodies = {m.group(1): m.group(2) for m in
                      re.finditer(r"ONNXC_NODE (?:static )?int node\d+_(\w+?)_\w*\(.*?\n(.*?)\n}\n", source, re.S)}
            for op in ("GlobalAveragePool", "GlobalMaxPool", "FusedElementwise", "Add"):
                assert "ONNXC_PARALLEL_FOR" in bodies[op], op
            # (NCHW to NHWC: tiles of a static batch's matrices on the threads, c/transpose_2d.c.j2;
            # a symbolic batch's strided copy is serial)
            assert ("ONNXC_PARALLEL_FOR" in bodies["Transpose"]) == (batch != "N")
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two)
    assert_close(runs[1], run_ort(model, x))


def test_pool_symbolic_batch_and_spatial():
    nodes = [node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             node("AveragePool", ["X"], "A", kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 2]),
             node("AveragePool", ["X"], "P", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
             node("GlobalAveragePool", ["X"], "G")]
    outputs = [("Y", TP.FLOAT, [None] * 4), ("I", TP.INT64, [None] * 4), ("A", TP.FLOAT, [None] * 4),
               ("P", TP.FLOAT, [None] * 4), ("G", TP.FLOAT, ["N", 3, 1, 1])]
    model = make_model(nodes, [("X", TP.FLOAT, ["N", 3, "H", "W"])], outputs)
    assert_symbolic(model, [{"X": randn([2, 3, 9, 8])}, {"X": randn([1, 3, 4, 7])}])


def test_max_unpool():
    x = randn([2, 3, 6, 8])
    pool = node("MaxPool", ["X"], ["P", "I"], kernel_shape=[2, 2], strides=[2, 2])
    unpool = node("MaxUnpool", ["P", "I"], "Y", kernel_shape=[2, 2], strides=[2, 2])
    model = make_model([pool, unpool], [("X", TP.FLOAT, x.shape)], [("Y", TP.FLOAT, [2, 3, 6, 8])])
    assert_matches_ort(model, {"X": x})


def test_max_unpool_output_shape():
    x = randn([1, 2, 2, 2])
    indices = np.array([[[[0, 3], [9, 14]], [[16, 18], [25, 31]]]], np.int64)
    model = make_model([node("MaxUnpool", ["X", "I", "S"], "Y", kernel_shape=[2, 2], strides=[2, 2])],
                       [("X", TP.FLOAT, x.shape), ("I", TP.INT64, indices.shape), ("S", TP.INT64, [4])],
                       [("Y", TP.FLOAT, [None] * 4)])
    assert_matches_reference(model, {"X": x, "I": indices, "S": np.array([1, 2, 5, 6], np.int64)})
    with pytest.raises(onnxc.RuntimeFailure):
        onnxc.InferenceSession(model.SerializeToString()).run(
            None, {"X": x, "I": indices * 5, "S": np.array([1, 2, 5, 6], np.int64)})


# --- CausalConvWithState -------------------------------------------------------

@pytest.mark.parametrize("k,length,bias,past,activation", [
    (4, 6, False, False, "none"), (4, 6, True, True, "silu"), (4, 2, False, True, "none"), (4, 2, True, False, "silu"),
    (1, 3, True, False, "none"), (2, 1, False, True, "silu")])
def test_causal_conv(k, length, bias, past, activation):
    m = causal_conv(3, k, length, bias=bias, past=past, activation=activation)
    assert_matches_ort(m, {i.name: randn([d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input})


def test_causal_conv_fp16_symbolic():
    m = causal_conv(3, 3, "L", elem=TP.FLOAT16, bias=True, past=True, activation="swish", batch="B")

    def feeds(n):
        return {"input": randn((2, 3, n), np.float16), "weight": randn((3, 1, 3), np.float16),
                "bias": randn(3, np.float16), "past_state": randn((2, 3, 2), np.float16)}
    assert_matches_ort_at_sizes(m, feeds, (1, 7), rtol=1e-2, atol=1e-2)


# --- DeformConv ----------------------------------------------------------------

def deform_conv(n, c, h, w, oc, kh, kw, oh, ow, elem=TP.FLOAT, bias=False, mask=False, offset_group=1, **attrs):
    names = ["X", "W", "offset", "B" if bias else "", "mask" if mask else ""]
    ins = [("X", elem, [n, c, h, w]), ("W", elem, [oc, c // attrs.get("group", 1), kh, kw]),
           ("offset", elem, [n, offset_group * kh * kw * 2, oh, ow])]
    if bias:
        ins.append(("B", elem, [oc]))
    if mask:
        ins.append(("mask", elem, [n, offset_group * kh * kw, oh, ow]))
    deform = helper.make_node("DeformConv", [x for x in names if x], ["Y"], offset_group=offset_group, **attrs)
    return make_model([deform], ins, [("Y", elem, [None] * 4)], opset=22)


def deform_conv_feeds(model, n=None, dtype=np.float32):
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value if d.dim_param == "" else n for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = (randn(shape) * (2 if i.name == "offset" else 1)).astype(dtype)
    return feeds


@pytest.mark.parametrize("attrs,shape", [
    ({}, (3, 3)),
    ({"pads": [1, 1, 1, 1]}, (5, 5)),
    ({"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 1]}, (2, 3)),
    ({"group": 2}, (3, 3)),
])
@pytest.mark.parametrize("bias,mask,offset_group", [(False, False, 1), (True, True, 2)])
def test_deform_conv(attrs, shape, bias, mask, offset_group):
    m = deform_conv(2, 4, 5, 4, 4, 3, 2, shape[0], shape[1], bias=bias, mask=mask, offset_group=offset_group,
                    **attrs)
    assert_matches_ort(m, deform_conv_feeds(m))


def test_deform_conv_double_symbolic():
    m = deform_conv("N", 2, 4, 4, 3, 2, 2, 3, 3, elem=TP.DOUBLE, bias=True, mask=True)
    assert_matches_ort_at_sizes(m, lambda n: deform_conv_feeds(m, n, np.float64), (1, 3), rtol=1e-9, atol=1e-9)
