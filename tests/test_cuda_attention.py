"""Parallel CUDA kernels of attention (templates/cuda/attention, linear_attention, rotary and
causal_conv_with_state .cu.j2) on the emulated CUDA build: sizes that take several blocks,
results compared with onnxruntime (with ONNX's reference evaluator where onnxruntime has no
kernel for the variant), and the generated source checked to launch each node in parallel (a block per query
row for Attention, a grid of threads for the others), not one thread.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import cuda_launches as launches
from helpers import cuda_session, make_model, run_ort
from models import causal_conv, linear_attention
from onnxc.runtime import cuda

CUDA = "CUDAExecutionProvider"
NP = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.DOUBLE: np.float64, TP.BOOL: np.bool_}


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def run_reference(model, feeds):
    """ONNX's reference evaluator: the oracle where onnxruntime has no kernel for a variant."""
    return ReferenceEvaluator(model).run(None, feeds)


def check(model, feeds, expect_launch: dict[str, str], sess=None, rtol=1e-5, atol=1e-6,
          oracle=run_ort) -> onnxc.InferenceSession:
    """Run on the emulated CUDA build, compare with onnxruntime (or `oracle`) and check the launches."""
    sess = sess or cuda_session(model)
    got = sess.run(None, feeds)
    want = oracle(model, feeds)
    for name, g, w in zip([o.name for o in model.graph.output], got, want):
        assert g.shape == w.shape, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=name)
    kinds = launches(sess)
    assert {n: kinds.get(n) for n in expect_launch} == expect_launch
    return sess


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --- Attention ---------------------------------------------------------------------------------

def attention(inputs, outputs, opset=23, elem=TP.FLOAT, name="Att", **attrs):
    """inputs: (name, shape[, elem]) in Attention's input order (None skips one); outputs:
    (name, rank) ("" skips one)."""
    names = [i[0] if i else "" for i in inputs]
    graph_inputs = [(i[0], i[2] if len(i) > 2 else elem, i[1]) for i in inputs if i]
    node = helper.make_node("Attention", names, [o[0] if o else "" for o in outputs], name=name, **attrs)
    return make_model([node], graph_inputs, [(o, elem, [None] * rank) for o, rank in (x for x in outputs if x)], opset=opset)


def feeds_for(model, dims=None, seed=0, **fixed):
    """Random feeds for the model's inputs, symbolic dims from `dims`; bool masks mostly True."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        if i.name in fixed:
            feeds[i.name] = fixed[i.name]
            continue
        t = i.type.tensor_type
        shape = [(dims or {}).get(d.dim_param, d.dim_value) for d in t.shape.dim]
        if t.elem_type == TP.BOOL:
            feeds[i.name] = rng.random(shape) > 0.3
        elif t.elem_type == TP.BFLOAT16:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(NP[t.elem_type])
    return feeds


def test_attention_takes_a_block_per_query_row():
    """4-D grouped-query attention (4 query heads on 2 kv heads, different K and V head sizes),
    causal, with a float mask, an explicit scale and symbolic batch and key lengths: 320 query
    rows, and 300 keys (the output's keys in several chunks); then the same session with a
    short key sequence."""
    m = attention([("Q", ["N", 4, 40, 24]), ("K", ["N", 2, "T", 24]), ("V", ["N", 2, "T", 20]),
                   ("attn_mask", [40, "T"])], [("Y", 4)], is_causal=1, scale=0.3)
    sess = check(m, feeds_for(m, {"N": 2, "T": 300}), {"Att": "block"}, rtol=1e-4, atol=1e-5)
    check(m, feeds_for(m, {"N": 3, "T": 7}, seed=1), {}, sess=sess, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_3d_with_cache_and_qk_output(mode):
    """3-D inputs (6 query heads on 3 kv heads) with past key / value, present outputs, a
    softcap and a 4-D float mask (broadcast over heads), and each qk_matmul_output_mode: the
    raw scores, after the softcap, after the mask, or the softmax."""
    m = attention([("Q", [2, 45, 6 * 16]), ("K", [2, 9, 3 * 16]), ("V", [2, 9, 3 * 8]),
                   ("attn_mask", [2, 1, 45, 21]), ("past_key", [2, 3, 12, 16]), ("past_value", [2, 3, 12, 8])],
                  [("Y", 3), ("present_key", 4), ("present_value", 4), ("qk_matmul_output", 4)],
                  q_num_heads=6, kv_num_heads=3, qk_matmul_output_mode=mode, softcap=2.5)
    check(m, feeds_for(m), {"Att": "block"}, rtol=1e-4, atol=1e-5)


def test_attention_bool_mask_and_fully_masked_rows():
    """A bool mask of rank 2 with whole rows False: those rows' outputs and probabilities are
    zeros (qk_matmul_output_mode 3), the others a softmax over the allowed keys."""
    m = attention([("Q", [3, 5, 70, 8]), ("K", [3, 5, 33, 8]), ("V", [3, 5, 33, 8]), ("attn_mask", [70, 33], TP.BOOL)],
                  [("Y", 4), "", "", ("qk_matmul_output", 4)], qk_matmul_output_mode=3)
    mask = np.random.default_rng(2).random((70, 33)) > 0.4
    mask[[0, 17, 69]] = False
    sess = check(m, feeds_for(m, attn_mask=mask), {"Att": "block"}, oracle=run_reference)
    y, qk = sess.run(None, feeds_for(m, attn_mask=mask))
    assert not y[:, :, [0, 17, 69]].any() and not qk[:, :, [0, 17, 69]].any()
    assert np.allclose(qk[:, :, 1].sum(-1), 1, atol=1e-5)


def test_attention_long_key_rows_and_wide_heads():
    """2200 keys (more than the block keeps in shared memory: the rest are scored again when
    read) and a head size of 272 (more than the staged part of Q's row): float32 with a causal
    mask, and double (compared with ONNX's reference)."""
    shapes = [("Q", [1, 2, 3, 272]), ("K", [1, 2, 2200, 272]), ("V", [1, 2, 2200, 40])]
    m = attention(shapes, [("Y", 4)], is_causal=1)
    check(m, feeds_for(m), {"Att": "block"}, rtol=1e-4, atol=1e-5)
    m = attention(shapes, [("Y", 4)], elem=TP.DOUBLE)
    check(m, feeds_for(m), {"Att": "block"}, oracle=run_reference, rtol=1e-12, atol=1e-12)


def test_attention_windows_and_padding():
    """Opset 24 / 25 variants (no onnxruntime kernel: compared with ONNX's reference): float16
    queries with nonpad_kv_seqlen (the keys past a batch entry's length are padding), and
    sliding windows on both sides with a float softmax precision."""
    m = attention([("Q", [2, 4, 36, 16]), ("K", [2, 2, 50, 16]), ("V", [2, 2, 50, 16]), None, None, None,
                   ("nonpad_kv_seqlen", [2], TP.INT64)], [("Y", 4)], opset=24, elem=TP.FLOAT16)
    check(m, feeds_for(m, nonpad_kv_seqlen=np.array([50, 41], np.int64)), {"Att": "block"}, oracle=run_reference,
          rtol=1e-3, atol=1e-3)
    m = attention([("Q", [2, 3, 60, 8]), ("K", [2, 3, 64, 8]), ("V", [2, 3, 64, 8])], [("Y", 4)], opset=25,
                  elem=TP.FLOAT16, left_window_size=5, right_window_size=2, softmax_precision=TP.FLOAT)
    check(m, feeds_for(m), {"Att": "block"}, oracle=run_reference, rtol=1e-3, atol=1e-3)


def test_attention_bfloat16_softmax_sums_in_key_order():
    """bfloat16 inputs: every step rounds to bfloat16 and the softmax's sum is taken in key order
    (one thread of the block), so the results equal ONNX's reference's, which does the same."""
    m = attention([("Q", [2, 4, 40, 8], TP.BFLOAT16), ("K", [2, 4, 90, 8], TP.BFLOAT16),
                   ("V", [2, 4, 90, 8], TP.BFLOAT16)], [("Y", 4)], elem=TP.BFLOAT16, is_causal=1)
    check(m, feeds_for(m), {"Att": "block"}, oracle=run_reference, rtol=0, atol=0)


# --- RotaryEmbedding ---------------------------------------------------------------------------

def rotary(x_shape, cache_shape, positions=True, elem=TP.FLOAT, name="Rot", **attrs):
    inputs = [("X", elem, x_shape), ("cos_cache", elem, cache_shape), ("sin_cache", elem, cache_shape)]
    if positions:
        seq = x_shape[2] if len(x_shape) == 4 else x_shape[1]
        inputs.append(("position_ids", TP.INT64, [x_shape[0], seq]))
    node = helper.make_node("RotaryEmbedding", [i[0] for i in inputs], ["Y"], name=name, **attrs)
    return make_model([node], inputs, [("Y", elem, x_shape)], opset=23)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_takes_a_thread_per_element(interleaved):
    """4-D with position ids and a symbolic batch (the whole head rotated, then a rotary dim of
    half the head: the rest copied), and a bad position id failing the run; 3-D without
    position ids."""
    for rot in (0, 8):
        m = rotary(["N", 3, 11, 16], [20, (rot or 16) // 2], interleaved=interleaved, rotary_embedding_dim=rot)
        feeds = {"X": rand(2, 3, 11, 16), "cos_cache": rand(20, (rot or 16) // 2, seed=1),
                 "sin_cache": rand(20, (rot or 16) // 2, seed=2),
                 "position_ids": np.random.default_rng(3).integers(0, 20, (2, 11))}
        sess = check(m, feeds, {"Rot": "grid"})
    with pytest.raises(Exception, match="position id out of range"):
        sess.run(None, {**feeds, "position_ids": np.full((2, 11), 20, np.int64)})
    check(m, {**feeds, "X": rand(3, 3, 11, 16), "position_ids": np.zeros((3, 11), np.int64)}, {}, sess=sess)
    m = rotary([2, 13, 4 * 12], [2, 13, 4], positions=False, num_heads=4, interleaved=interleaved,
               rotary_embedding_dim=8)
    check(m, {"X": rand(2, 13, 48), "cos_cache": rand(2, 13, 4, seed=1), "sin_cache": rand(2, 13, 4, seed=2)},
          {"Rot": "grid"})


def test_rotary_float16():
    """float16 (products and sums rounded to float16, as ONNX's reference does)."""
    m = rotary([2, 7, 6, 16], [10, 8], elem=TP.FLOAT16)
    feeds = {"X": rand(2, 7, 6, 16, dtype=np.float16), "cos_cache": rand(10, 8, seed=1, dtype=np.float16),
             "sin_cache": rand(10, 8, seed=2, dtype=np.float16),
             "position_ids": np.random.default_rng(3).integers(0, 10, (2, 6))}
    check(m, feeds, {"Rot": "grid"}, oracle=run_reference, rtol=0, atol=0)


# --- LinearAttention ---------------------------------------------------------------------------

def la_feeds(model, dims, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        shape = [dims.get(d.dim_param, d.dim_value) for d in inp.type.tensor_type.shape.dim]
        x = rng.standard_normal(shape).astype(np.float32)
        if inp.name == "decay":
            x = -np.abs(x) * 0.5
        if inp.name == "beta":
            x = 1 / (1 + np.exp(-x))
        if inp.name == "key":
            x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        feeds[inp.name] = x.astype(dtype)
    return feeds


@pytest.mark.parametrize("rule,decay,beta,past", [
    ("linear", None, None, False), ("gated", "key", None, True), ("delta", None, "one", True),
    ("gated_delta", "head", "head", True), ("gated_delta", "key", "head", False)])
def test_linear_attention_takes_a_thread_per_state_column(rule, decay, beta, past):
    """Each update rule, decay per key or per head, beta per head or shared, with and without a
    past state; 4 query heads on 2 kv heads, d_v 72 (288 state columns), symbolic batch and
    sequence (run at two sizes)."""
    hq, hkv, dk, dv = 4, 2, 16, 72
    widths = {"key": hkv * dk, "head": hkv, "one": 1, None: None}
    m = linear_attention(rule, hq, hkv, dk, dv, "B", "T", past=past, decay_width=widths[decay], name="Lin",
                         beta_width=widths[beta])
    sess = check(m, la_feeds(m, {"B": 2, "T": 9}), {"Lin": "grid"}, rtol=1e-4, atol=1e-5)
    check(m, la_feeds(m, {"B": 3, "T": 1}, seed=1), {}, sess=sess, rtol=1e-4, atol=1e-5)


def test_linear_attention_float16():
    """float16 inputs (a float state, rounded to float16 in present_state), against ONNX's reference."""
    m = linear_attention("gated_delta", 2, 2, 8, 80, 2, 6, elem=TP.FLOAT16, decay_width=2, beta_width=2, scale=0.3, name="Lin")
    check(m, la_feeds(m, {}, np.float16), {"Lin": "grid"}, oracle=run_reference, rtol=1e-3, atol=1e-3)


# --- CausalConvWithState -----------------------------------------------------------------------

@pytest.mark.parametrize("k,bias,past,activation", [
    (4, True, True, "silu"), (4, False, False, "none"), (3, True, False, "swish"), (2, False, True, "none")])
def test_causal_conv_takes_a_thread_per_output(k, bias, past, activation):
    """40 channels, a symbolic batch and length: the outputs (the taps in order) and the carried
    state; at a length of 9 (720 outputs) and of 1 (a decode step: the state is mostly the
    past one)."""
    m = causal_conv(40, k, "L", bias=bias, past=past, activation=activation, batch="B", name="Conv")

    def feeds(b, n, seed):
        f = {"input": rand(b, 40, n, seed=seed), "weight": rand(40, 1, k, seed=seed + 1)}
        if bias:
            f["bias"] = rand(40, seed=seed + 2)
        if past:
            f["past_state"] = rand(b, 40, k - 1, seed=seed + 3)
        return f
    sess = check(m, feeds(2, 9, 0), {"Conv": "grid"})
    check(m, feeds(3, 1, 4), {}, sess=sess)


def test_causal_conv_float16():
    """float16 with SiLU (the convolution rounded to float16 before the activation), against ONNX's reference."""
    m = causal_conv(33, 4, 12, elem=TP.FLOAT16, bias=True, past=True, activation="silu", name="Conv")
    feeds = {"input": rand(2, 33, 12, dtype=np.float16), "weight": rand(33, 1, 4, seed=1, dtype=np.float16),
             "bias": rand(33, seed=2, dtype=np.float16), "past_state": rand(2, 33, 3, seed=3, dtype=np.float16)}
    # (the reference rounds one SiLU product apart: 2^-8 on an output near 0.01)
    check(m, feeds, {"Conv": "grid"}, oracle=run_reference, rtol=0, atol=2.0 ** -8)
