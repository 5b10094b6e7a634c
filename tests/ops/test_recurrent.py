"""RNN, GRU and LSTM against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16}


def recurrent_case(op, *, seq=4, batch=3, inp=5, hidden=6, direction="forward", layout=0, bias=True,
                   lens=None, init=False, peep=False, dtype=np.float32, outputs=("Y", "Y_h", "Y_c"),
                   shapes=None, weights_as_initializers=False, opset=22, seed=0, **attrs):
    """A one-node model and random feeds; shapes overrides declared input shapes (symbolic dims)."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    elem = ELEM[dtype]

    def rand(*s, scale=0.5):
        return (rng.standard_normal(s) * scale).astype(dtype)

    x_shape = (batch, seq, inp) if layout else (seq, batch, inp)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    tensors = {"X": rand(*x_shape, scale=1.0), "W": rand(dirs, g * hidden, inp), "R": rand(dirs, g * hidden, hidden)}
    names = ["X", "W", "R"]
    if bias:
        tensors["B"] = rand(dirs, 2 * g * hidden)
    names.append("B" if bias else "")
    if lens is not None:
        tensors["sequence_lens"] = np.array(lens, dtype=np.int32)
    names.append("sequence_lens" if lens is not None else "")
    if init:
        tensors["initial_h"] = rand(*state)
        if op == "LSTM":
            tensors["initial_c"] = rand(*state)
    names.append("initial_h" if init else "")
    if op == "LSTM":
        names.append("initial_c" if init else "")
        if peep:
            tensors["P"] = rand(dirs, 3 * hidden)
        names.append("P" if peep else "")
    while names and not names[-1]:
        names.pop()
    outs = [o if o in outputs else "" for o in (["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"])]
    while outs and not outs[-1]:
        outs.pop()
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction, **attrs)
    inits, inputs, feeds = [], [], {}
    for n in names:
        if not n:
            continue
        v = tensors[n]
        t = TensorProto.INT32 if n == "sequence_lens" else elem
        if weights_as_initializers and n in ("W", "R", "B", "P"):
            inits.append(numpy_helper.from_array(v, n))
        else:
            inputs.append((n, t, (shapes or {}).get(n, v.shape)))
            feeds[n] = v
    model = make_model([node], inputs, [(o, elem, [None] * (4 if o == "Y" else 3)) for o in outs if o], inits, opset=opset)
    return model, feeds


def expected(op, feeds, layout=0, **case):
    """onnxruntime's outputs for the feeds, from a float32 layout-0 model (it has no layout 1 and
    no double recurrent kernels): inputs cast and transposed, outputs transposed back."""
    model, _ = recurrent_case(op, layout=0, dtype=np.float32, **case)
    feeds32 = {}
    for n, v in feeds.items():
        if v.dtype.kind == "f":
            v = v.astype(np.float32)
        if layout and n in ("X", "initial_h", "initial_c"):
            v = np.swapaxes(v, 0, 1)
        feeds32[n] = v
    outs = run_ort(model, feeds32)
    if layout:
        outs = [np.transpose(o, (2, 0, 1, 3) if o.ndim == 4 else (1, 0, 2)) for o in outs]
    return outs


def check(op, rtol=1e-4, atol=1e-5, layout=0, dtype=np.float32, **case):
    """Compile the case, compare with onnxruntime."""
    model, feeds = recurrent_case(op, layout=layout, dtype=dtype, **case)
    if layout == 0 and dtype == np.float32:
        assert_matches_ort(model, feeds, rtol=rtol, atol=atol)
        return
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    want = expected(op, feeds, layout, **case)
    assert len(actual) == len(want)
    for a, e in zip(actual, want):
        assert a.dtype == dtype and a.shape == e.shape
        np.testing.assert_allclose(a.astype(np.float64), e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction,layout", [("forward", 0), ("reverse", 1), ("bidirectional", 0),
                                              ("bidirectional", 1)])
def test_directions_layouts(op, direction, layout):
    check(op, direction=direction, layout=layout, init=True, lens=[4, 2, 3])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_no_bias_no_state_opset7(op):
    check(op, bias=False, opset=7)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_weights_as_initializers_and_clip(op):
    check(op, weights_as_initializers=True, clip=0.7, direction="bidirectional", hidden=20, inp=17)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_only_last_state(op):
    check(op, outputs=("Y_h",), lens=[1, 4, 0], direction="reverse")


def test_gru_linear_before_reset():
    check("GRU", linear_before_reset=1, init=True, direction="bidirectional")


@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_peepholes(input_forget):
    check("LSTM", peep=True, init=True, input_forget=input_forget, lens=[3, 4, 1])


@pytest.mark.parametrize("acts,alpha,beta", [
    (["Relu", "Sigmoid"], [], []),
    (["Affine", "LeakyRelu"], [0.7, 0.3], [0.2]),
    (["ThresholdedRelu", "ScaledTanh"], [0.1, 1.5], [0.8]),
    (["HardSigmoid", "Elu"], [0.3, 0.9], [0.4]),
    (["Softsign", "Softplus"], [], []),
])
def test_rnn_activations(acts, alpha, beta):
    """One activation per direction; alpha/beta are consumed in order by those that take them."""
    attrs = {"activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check("RNN", direction="bidirectional", **attrs)


def test_lstm_activations_bidirectional():
    check("LSTM", direction="bidirectional", init=True,
          activations=["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "LeakyRelu", "Elu"],
          activation_alpha=[0.25, 0.05, 0.8], activation_beta=[0.45])


def test_gru_activations():
    check("GRU", activations=["Sigmoid", "ScaledTanh"], activation_alpha=[1.2], activation_beta=[0.7], init=True)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_double(op):
    check(op, dtype=np.float64, init=True, direction="bidirectional", lens=[2, 4, 4])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_float16(op):
    check(op, dtype=np.float16, init=True, direction="bidirectional", rtol=1e-2, atol=5e-3)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("layout", [0, 1])
def test_symbolic_seq_and_batch(op, layout):
    shapes = {"X": ["N", "S", 5] if layout else ["S", "N", 5], "sequence_lens": ["N"]}
    model, _ = recurrent_case(op, shapes=shapes, layout=layout, lens=[1, 1, 1])
    sess = onnxc.InferenceSession(model.SerializeToString())
    for seq, batch, seed in ((4, 3, 1), (7, 2, 2)):
        lens = [int(n) for n in np.random.default_rng(seed).integers(1, seq + 1, batch)]
        case = {"seq": seq, "batch": batch, "seed": seed, "lens": lens}
        _, feeds = recurrent_case(op, layout=layout, **case)
        for a, e in zip(sess.run(None, feeds), expected(op, feeds, layout, **case)):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_sequence_length_out_of_range():
    model, feeds = recurrent_case("RNN", lens=[1, 5, 2])
    sess = onnxc.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="sequence_lens"):
        sess.run(None, feeds)
