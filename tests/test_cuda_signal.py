"""Parallel CUDA kernels of the signal ops and Col2Im (templates/cuda/dft, stft, window, mel and
col2im .cu.j2) on the emulated CUDA build: sizes that take several blocks, results compared with
onnxruntime, and the generated source checked to launch each node over many threads (a grid,
or blocks that meet at a barrier to share a table of roots of unity), not one thread.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import cuda_check
from helpers import random_normal as rand
from helpers import make_inferred_model as build
from onnxc.runtime import cuda


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def check(*args, **kwargs) -> onnxc.InferenceSession:
    return cuda_check(*args, same_dtype=True, **kwargs)


def i64(name, value):
    return numpy_helper.from_array(np.array(value, np.int64), name)


def test_dft_takes_a_thread_per_bin():
    """DFT-17 along a middle axis of complex input (length 20: direct sums in C), the one-sided
    real transform of length 64 (the C build's FFT), the inverse with a dft_length that pads
    with zeros, one that truncates, batch dims symbolic."""
    nodes = [helper.make_node("DFT", ["x"], ["fwd"], name="Forward", axis=1),
             helper.make_node("DFT", ["r"], ["half"], name="Rfft", axis=1, onesided=1),
             helper.make_node("DFT", ["x", "pad_len"], ["inv"], name="InversePadded", axis=1, inverse=1),
             helper.make_node("DFT", ["x", "cut_len"], ["cut"], name="Truncated", axis=2)]
    model = build(nodes, [("x", TP.FLOAT, ["N", 20, 7, 2]), ("r", TP.FLOAT, ["M", 64, 5, 1])],
                  [("fwd", TP.FLOAT, None), ("half", TP.FLOAT, None), ("inv", TP.FLOAT, None),
                   ("cut", TP.FLOAT, None)], [i64("pad_len", 27), i64("cut_len", 5)], opset=17)
    check(model, {"x": rand(2, 20, 7, 2), "r": rand(3, 64, 5, 1, seed=1)},
          {"Forward": "block", "Rfft": "block", "InversePadded": "block", "Truncated": "block"},
          rtol=1e-4, atol=1e-4)


def test_dft_20_axis_from_an_input_irfft_and_long_transforms():
    """DFT-20: the axis from a graph input (the output dims are computed on the host), the
    one-sided inverse (irfft, a thread per real sample), and a transform longer than the roots
    table in shared memory (each root computed)."""
    nodes = [helper.make_node("DFT", ["x", "", "axis"], ["y"], name="RunAxis"),
             helper.make_node("DFT", ["s", "", "m2"], ["real"], name="Irfft", inverse=1, onesided=1),
             helper.make_node("DFT", ["long", "", "m2"], ["spec"], name="Long")]
    model = build(nodes, [("x", TP.FLOAT, [3, 11, 13, 2]), ("axis", TP.INT64, []), ("s", TP.FLOAT, [4, 90, 2]),
                          ("long", TP.FLOAT, [1, 2048, 1])],
                  [("y", TP.FLOAT, [None, None, None, None]), ("real", TP.FLOAT, None), ("spec", TP.FLOAT, None)],
                  [i64("m2", -2)], opset=20)
    feeds = {"x": rand(3, 11, 13, 2), "axis": np.array(-2, np.int64), "s": rand(4, 90, 2, seed=1),
             "long": rand(1, 2048, 1, seed=2)}
    sess = check(model, feeds, {"RunAxis": "block", "Irfft": "block", "Long": "block"}, rtol=1e-4, atol=1e-4)
    check(model, {**feeds, "axis": np.array(1, np.int64)}, {}, sess=sess, rtol=1e-4, atol=1e-4)


def test_stft_takes_a_thread_per_bin():
    """STFT of a real signal times a window (onesided, N symbolic), of a complex signal with a
    frame_length and no window (both sides), and with frames longer than the shared roots table."""
    nodes = [helper.make_node("STFT", ["x", "step", "win"], ["windowed"], name="Windowed"),
             helper.make_node("STFT", ["c", "step7", "", "len33"], ["both"], name="Complex", onesided=0),
             helper.make_node("STFT", ["long", "step256", "", "len2048"], ["lng"], name="LongFrames")]
    model = build(nodes, [("x", TP.FLOAT, ["N", 400, 1]), ("win", TP.FLOAT, [32]), ("c", TP.FLOAT, [2, 300, 2]),
                          ("long", TP.FLOAT, [1, 2600, 1])],
                  [("windowed", TP.FLOAT, None), ("both", TP.FLOAT, None), ("lng", TP.FLOAT, None)],
                  [i64("step", 8), i64("step7", 7), i64("len33", 33), i64("step256", 256), i64("len2048", 2048)],
                  opset=17)
    hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(32) / 32)).astype(np.float32)
    check(model, {"x": rand(2, 400, 1), "win": hann, "c": rand(2, 300, 2, seed=1), "long": rand(1, 2600, 1, seed=2)},
          {"Windowed": "block", "Complex": "block", "LongFrames": "block"}, rtol=1e-4, atol=1e-4)


def test_windows_take_a_thread_per_element():
    """Hann (periodic), Hamming (symmetric: NaN for size 1), Blackman (float64) and Hann with
    int32 output of a few hundred elements, their sizes from graph inputs (constant ones are
    folded)."""
    nodes = [helper.make_node("HannWindow", ["size"], ["hann"], name="Hann"),
             helper.make_node("HammingWindow", ["size2"], ["hamming"], name="Hamming", periodic=0),
             helper.make_node("BlackmanWindow", ["size"], ["blackman"], name="Blackman", output_datatype=TP.DOUBLE),
             helper.make_node("HannWindow", ["size2"], ["int_hann"], name="IntHann", output_datatype=TP.INT32)]
    model = build(nodes, [("size", TP.INT64, []), ("size2", TP.INT32, [1])],
                  [("hann", TP.FLOAT, [None]), ("hamming", TP.FLOAT, [None]), ("blackman", TP.DOUBLE, [None]),
                   ("int_hann", TP.INT32, [None])], opset=17)
    sess = check(model, {"size": np.array(301, np.int64), "size2": np.array([517], np.int32)},
                 {"Hann": "grid", "Hamming": "grid", "Blackman": "grid", "IntHann": "grid"})
    check(model, {"size": np.array(1, np.int64), "size2": np.array([1], np.int32)}, {}, sess=sess)


def test_mel_weight_matrix_takes_a_thread_per_element():
    """MelWeightMatrix from constants (float32), from graph inputs (float64, the dims computed
    on the host), and edges past the spectrum failing the run."""
    nodes = [helper.make_node("MelWeightMatrix", ["bins", "len", "rate", "lo", "hi"], ["mel"], name="Mel"),
             helper.make_node("MelWeightMatrix", ["r_bins", "r_len", "r_rate", "r_lo", "r_hi"], ["mel64"],
                              name="MelRun", output_datatype=TP.DOUBLE)]
    # Mel: sizes constant (a static output shape), rate and edges from graph inputs
    model = build(nodes, [("rate", TP.INT64, []), ("lo", TP.FLOAT, []), ("hi", TP.FLOAT, []),
                          ("r_bins", TP.INT64, []), ("r_len", TP.INT64, []), ("r_rate", TP.INT64, []),
                          ("r_lo", TP.FLOAT, []), ("r_hi", TP.FLOAT, [])],
                  [("mel", TP.FLOAT, None), ("mel64", TP.DOUBLE, [None, None])],
                  [i64("bins", 20), i64("len", 512)], opset=17)
    feeds = {"rate": np.array(16000, np.int64), "lo": np.array(10.0, np.float32), "hi": np.array(7600.0, np.float32),
             "r_bins": np.array(33, np.int64), "r_len": np.array(300, np.int64), "r_rate": np.array(8000, np.int64),
             "r_lo": np.array(0.0, np.float32), "r_hi": np.array(4000.0, np.float32)}
    sess = check(model, feeds, {"Mel": "grid", "MelRun": "grid"})
    # far above the Nyquist frequency (4000), and just enough that only the last filter ends past it
    for hi in (9000.0, 4315.0):
        with pytest.raises(onnxc.RuntimeFailure, match="MelWeightMatrix: filter edge outside the spectrum"):
            sess.run(None, {**feeds, "r_hi": np.array(hi, np.float32)})
    check(model, feeds, {}, sess=sess)   # a failed run leaves the session working


def test_col2im_takes_a_thread_per_element():
    """Col2Im in 2-D with strides, pads and dilations (N symbolic), in 3-D, with block_shape from
    a graph input, and with strides that leave image elements no block covers."""
    nodes = [helper.make_node("Col2Im", ["x2", "img2", "blk2"], ["y2"], name="Col2Im2d", strides=[2, 1],
                              pads=[1, 0, 2, 1], dilations=[1, 2]),
             helper.make_node("Col2Im", ["x3", "img3", "blk3"], ["y3"], name="Col2Im3d", strides=[1, 2, 1]),
             helper.make_node("Col2Im", ["xr", "imgr", "run_blk"], ["yr"], name="Col2ImRunBlock"),
             helper.make_node("Col2Im", ["xd", "imgr", "blkd"], ["yd"], name="Col2ImGaps", strides=[3, 3],
                              pads=[1, 1, 1, 1])]
    # 2-D: image 13 x 11, block 3 x 2: windows ((13 + 3 - 3) / 2 + 1) x (11 + 1 - 2 - 1 + 1) = 7 x 10
    # 3-D: image 5 x 9 x 6, block 2 x 3 x 2: windows 4 x 4 x 5
    # run-time block 3 x 4 over 9 x 10: windows 7 x 7; block 2 x 2, stride 3, pads 1: 4 x 4
    inits = [i64("img2", [13, 11]), i64("blk2", [3, 2]), i64("img3", [5, 9, 6]), i64("blk3", [2, 3, 2]),
             i64("imgr", [9, 10]), i64("blkd", [2, 2])]
    model = build(nodes, [("x2", TP.FLOAT, ["N", 4 * 6, 70]), ("x3", TP.FLOAT, [2, 3 * 12, 80]),
                          ("xr", TP.FLOAT, [2, 5 * 12, 49]), ("run_blk", TP.INT64, [2]),
                          ("xd", TP.FLOAT, [3, 4 * 4, 16])],
                  [("y2", TP.FLOAT, None), ("y3", TP.FLOAT, None), ("yr", TP.FLOAT, [2, None, 9, 10]),
                   ("yd", TP.FLOAT, None)], inits, opset=18)
    feeds = {"x2": rand(2, 24, 70), "x3": rand(2, 36, 80, seed=1), "xr": rand(2, 60, 49, seed=2),
             "run_blk": np.array([3, 4], np.int64), "xd": rand(3, 16, 16, seed=3)}
    check(model, feeds, {"Col2Im2d": "grid", "Col2Im3d": "grid", "Col2ImRunBlock": "grid", "Col2ImGaps": "grid"})
