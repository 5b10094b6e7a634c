"""Attention, RotaryEmbedding, LinearAttention and FlexAttention against onnxruntime (and the ONNX reference
where onnxruntime lacks a kernel)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxc
from helpers import assert_matches_ort, assert_matches_ort_at_sizes, make_model, run_onnxc, run_ort, softmax_bfloat16_by_steps
from models import linear_attention

F, H, B = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BOOL
rng = np.random.default_rng(0)
NP = {F: np.float32, H: np.float16, TensorProto.DOUBLE: np.float64, B: np.bool_}


def attention(inputs, outputs, opset=23, elem=F, **attrs):
    """inputs: (name, shape[, elem]) in Attention input order ("" skips); outputs: names ("" skips)."""
    names = [i[0] if i else "" for i in inputs]
    graph_inputs = [(i[0], i[2] if len(i) > 2 else elem, i[1]) for i in inputs if i]
    node = helper.make_node("Attention", names, list(outputs), **attrs)
    outs = [(o, elem, None) for o in outputs if o]
    model = make_model([node], graph_inputs, [(n, t, [None] * 4) for n, t, _ in outs], opset=opset)
    return model


def feeds_for(model, **fixed):
    feeds = {}
    for i in model.graph.input:
        if i.name in fixed:
            feeds[i.name] = fixed[i.name]
            continue
        t = i.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if t.elem_type == B:
            feeds[i.name] = rng.random(shape) > 0.3
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(NP[t.elem_type])
    return feeds


def fix_output_ranks(model, ranks):
    for o, r in zip(model.graph.output, ranks):
        del o.type.tensor_type.shape.dim[:]
        for _ in range(r):
            o.type.tensor_type.shape.dim.add()
    return model


def matches_reference(model, feeds, rtol=1e-4, atol=1e-5):
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = onnxc.InferenceSession(model.SerializeToString()).run(None, feeds)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def test_4d_basic_scaled():
    m = attention([("Q", [2, 3, 4, 8]), ("K", [2, 3, 6, 8]), ("V", [2, 3, 6, 5])], ["Y"], scale=0.3)
    assert_matches_ort(m, feeds_for(m))


@pytest.mark.parametrize("causal", [0, 1])
def test_3d_gqa(causal):
    m = attention([("Q", [2, 4, 32]), ("K", [2, 6, 16]), ("V", [2, 6, 12])], ["Y"], q_num_heads=4, kv_num_heads=2,
                  is_causal=causal)
    fix_output_ranks(m, [3])
    assert_matches_ort(m, feeds_for(m))


@pytest.mark.parametrize("mask_shape,elem", [([4, 6], B), ([2, 1, 4, 6], F), ([3, 4, 6], F), ([4, 6], F)])
def test_masks(mask_shape, elem):
    m = attention([("Q", [2, 3, 4, 8]), ("K", [2, 3, 6, 8]), ("V", [2, 3, 6, 8]), ("attn_mask", mask_shape, elem)],
                  ["Y"])
    assert_matches_ort(m, feeds_for(m))


def test_short_mask_and_causal():
    m = attention([("Q", [1, 2, 3, 4]), ("K", [1, 2, 5, 4]), ("V", [1, 2, 5, 4]), ("attn_mask", [3, 4], B)], ["Y"],
                  is_causal=1)
    matches_reference(m, feeds_for(m))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_past_present_qk_output(mode):
    m = attention([("Q", [2, 3, 4, 8]), ("K", [2, 3, 2, 8]), ("V", [2, 3, 2, 8]), ("attn_mask", [4, 7]),
                   ("past_key", [2, 3, 5, 8]), ("past_value", [2, 3, 5, 8])],
                  ["Y", "present_key", "present_value", "qk_matmul_output"], qk_matmul_output_mode=mode,
                  softcap=2.5 if mode else 0.0)
    assert_matches_ort(m, feeds_for(m))


def test_causal_with_past():
    m = attention([("Q", [1, 2, 3, 4]), ("K", [1, 2, 3, 4]), ("V", [1, 2, 3, 4]), "",
                   ("past_key", [1, 2, 2, 4]), ("past_value", [1, 2, 2, 4])],
                  ["Y", "present_key", "present_value"], is_causal=1)
    assert_matches_ort(m, feeds_for(m))


def test_fully_masked_row_is_zero():
    m = attention([("Q", [1, 2, 2, 8]), ("K", [1, 2, 2, 8]), ("V", [1, 2, 2, 8]), ("attn_mask", [2, 2], B)],
                  ["Y", "", "", "qk_matmul_output"], qk_matmul_output_mode=3)
    feeds = feeds_for(m, attn_mask=np.array([[False, False], [True, True]]))
    y, qk = onnxc.InferenceSession(m.SerializeToString()).run(None, feeds)
    assert not y[:, :, 0].any() and not qk[:, :, 0].any()
    matches_reference(m, feeds)


def test_nonpad_kv_seqlen():
    m = attention([("Q", [2, 4, 1, 8]), ("K", [2, 2, 8, 8]), ("V", [2, 2, 8, 8]), "", "", "",
                   ("nonpad_kv_seqlen", [2], TensorProto.INT64)], ["Y"], opset=24, is_causal=1)
    matches_reference(m, feeds_for(m, nonpad_kv_seqlen=np.array([8, 5], np.int64)))


def test_window_opset25():
    m = attention([("Q", [2, 3, 4, 8]), ("K", [2, 3, 6, 8]), ("V", [2, 3, 6, 8])], ["Y"], opset=25,
                  left_window_size=2, right_window_size=1)
    matches_reference(m, feeds_for(m))


@pytest.mark.parametrize("precision", [None, TensorProto.FLOAT])
def test_float16(precision):
    attrs = {} if precision is None else {"softmax_precision": precision}
    m = attention([("Q", [1, 2, 3, 8]), ("K", [1, 2, 5, 8]), ("V", [1, 2, 5, 8])], ["Y"], elem=H, is_causal=1,
                  **attrs)
    matches_reference(m, feeds_for(m), rtol=2e-3, atol=2e-3)


def attention_graph(elem: int, scale: np.ndarray, q: list, k: list, v: list):
    """softmax(Q s (K^T s) + bias) V as Attention's function body writes it, every tensor of type
    ``elem``: Mul, Transpose, Mul, MatMul, Add, Softmax, MatMul."""
    nodes = [helper.make_node("Mul", ["Q", "scale"], ["q_scaled"]),
             helper.make_node("Transpose", ["K"], ["k_t"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["k_t", "scale"], ["k_scaled"]),
             helper.make_node("MatMul", ["q_scaled", "k_scaled"], ["scores"]),
             helper.make_node("Add", ["scores", "bias"], ["biased"]),
             helper.make_node("Softmax", ["biased"], ["probs"]),
             helper.make_node("MatMul", ["probs", "V"], ["Y"])]
    inputs = [("Q", elem, q), ("K", elem, k), ("V", elem, v), ("bias", elem, [q[2], k[2]])]
    return make_model(nodes, inputs, [("Y", elem, q[:3] + v[3:])], [numpy_helper.from_array(scale, "scale")], opset=23)


def bfloat16_attention_by_steps(feeds: dict, scale: np.ndarray) -> np.ndarray:
    """The graph of attention_graph in numpy on bfloat16 inputs, each tensor rounded to bfloat16
    (a MatMul summed exactly and rounded once), the Softmax as the reference computes it."""
    t = feeds["Q"].dtype

    def rounded(a):
        return np.asarray(a).astype(t).astype(np.float64)
    q, k, v, bias = (feeds[n].astype(np.float64) for n in ("Q", "K", "V", "bias"))
    s = scale.astype(np.float64)
    scores = rounded(rounded(q * s) @ rounded(k.swapaxes(-1, -2) * s))
    probs = softmax_bfloat16_by_steps((scores + bias).astype(t)).astype(np.float64)
    return (probs @ v).astype(t)


def attention_graph_and_feeds(np_type):
    q, k, v = [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 6]
    scale = np.array([0.6], np_type)
    model = attention_graph(helper.np_dtype_to_tensor_dtype(np.dtype(np_type)), scale, q, k, v)
    causal = np.where(np.arange(7)[None, :] <= np.arange(5)[:, None] + 2, 0, -np.inf)
    feeds = {name: rng.standard_normal(shape).astype(np_type) for name, shape in (("Q", q), ("K", k))}
    feeds["V"] = rng.random(v).astype(np_type)   # positive: no output near 0, where ulps say little
    feeds["bias"] = (causal + rng.standard_normal((5, 7))).astype(np_type)
    return model, feeds, scale


def test_bfloat16_attention_graph_as_the_reference_computes_it():
    """Attention written out as primitive ops (its _expanded form) on bfloat16 tensors (onnxruntime
    has no kernels for them): each tensor rounded to bfloat16, the Softmax as the reference
    computes its function body (the row summed in index order in bfloat16): the reference's bits."""
    import ml_dtypes
    model, feeds, scale = attention_graph_and_feeds(ml_dtypes.bfloat16)
    got = run_onnxc(model, feeds)[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, bfloat16_attention_by_steps(feeds, scale))
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, feeds)[0])


def test_float16_attention_graph_as_onnxruntime_computes_it():
    """The same graph on float16 tensors: each tensor rounded to float16, the Softmax computed in
    float32 and rounded once as onnxruntime computes it: within 2 ulps of onnxruntime's result
    (whose float16 MatMuls round differently at times) and nearer to it than the reference, which
    rounds each step of the Softmax to float16."""
    model, feeds, _ = attention_graph_and_feeds(np.float16)
    got = run_onnxc(model, feeds)[0]
    assert got.dtype == np.float16
    ort = run_ort(model, feeds)[0].view(np.int16).astype(np.int32)
    ulps = np.abs(got.view(np.int16).astype(np.int32) - ort)
    reference_ulps = np.abs(ReferenceEvaluator(model).run(None, feeds)[0].view(np.int16).astype(np.int32) - ort)
    assert ulps.max() <= 2, np.bincount(ulps.ravel())
    assert ulps.sum() < reference_ulps.sum(), (np.bincount(ulps.ravel()), np.bincount(reference_ulps.ravel()))


def test_double():
    m = attention([("Q", [1, 2, 3, 8]), ("K", [1, 2, 5, 8]), ("V", [1, 2, 5, 8])], ["Y"],
                  elem=TensorProto.DOUBLE, softcap=1.5)
    matches_reference(m, feeds_for(m), rtol=1e-10, atol=1e-12)


def test_symbolic_dims():
    m = attention([("Q", ["batch", 2, "seq", 8]), ("K", ["batch", 2, "kv", 8]), ("V", ["batch", 2, "kv", 8]),
                   ("attn_mask", ["seq", "kv"])], ["Y"], is_causal=1)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for b, s, kv in ((1, 3, 5), (3, 2, 2)):
        feeds = {"Q": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
                 "K": rng.standard_normal((b, 2, kv, 8)).astype(np.float32),
                 "V": rng.standard_normal((b, 2, kv, 8)).astype(np.float32),
                 "attn_mask": rng.standard_normal((s, kv)).astype(np.float32)}
        expected = ReferenceEvaluator(m).run(None, feeds)[0]
        np.testing.assert_allclose(sess.run(None, feeds)[0], expected, rtol=1e-4, atol=1e-5)


def test_symbolic_mismatch_fails():
    m = attention([("Q", ["b", 2, 3, 8]), ("K", ["b2", 2, 5, 8]), ("V", ["b2", 2, 5, 8])], ["Y"])
    sess = onnxc.InferenceSession(m.SerializeToString())
    feeds = {"Q": np.zeros((2, 2, 3, 8), np.float32), "K": np.zeros((1, 2, 5, 8), np.float32),
             "V": np.zeros((1, 2, 5, 8), np.float32)}
    with pytest.raises(onnxc.RuntimeFailure, match="dims b and b2 must be equal"):
        sess.run(None, feeds)


def rotary(x_shape, cache_shape, positions=True, elem=F, **attrs):
    inputs = [("X", elem, x_shape), ("cos_cache", elem, cache_shape), ("sin_cache", elem, cache_shape)]
    if positions:
        seq = x_shape[2] if len(x_shape) == 4 else x_shape[1]
        inputs.append(("position_ids", TensorProto.INT64, [x_shape[0], seq]))
    node = helper.make_node("RotaryEmbedding", [i[0] for i in inputs], ["Y"], **attrs)
    return make_model([node], inputs, [("Y", elem, x_shape)], opset=23)


def rotary_feeds(model, max_pos=10):
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if i.name == "position_ids":
            feeds[i.name] = rng.integers(0, max_pos, size=shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(NP[t.elem_type])
    return feeds


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot_dim", [0, 4])
def test_rotary_4d(interleaved, rot_dim):
    m = rotary([2, 3, 5, 8], [10, (rot_dim or 8) // 2], interleaved=interleaved, rotary_embedding_dim=rot_dim)
    assert_matches_ort(m, rotary_feeds(m))


def test_rotary_3d_no_positions():
    m = rotary([2, 5, 12], [2, 5, 3], positions=False, num_heads=2)
    assert_matches_ort(m, rotary_feeds(m))


def test_rotary_float16():
    m = rotary([1, 2, 3, 8], [10, 4], elem=H)
    matches_reference(m, rotary_feeds(m), rtol=2e-3, atol=2e-3)


def test_rotary_symbolic():
    m = rotary(["b", 2, "s", 8], [10, 4])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for b, s in ((1, 3), (2, 6)):
        feeds = {"X": rng.standard_normal((b, 2, s, 8)).astype(np.float32),
                 "cos_cache": rng.standard_normal((10, 4)).astype(np.float32),
                 "sin_cache": rng.standard_normal((10, 4)).astype(np.float32),
                 "position_ids": rng.integers(0, 10, size=(b, s)).astype(np.int64)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5,
                                   atol=1e-6)
    feeds["position_ids"][0, 0] = 10
    with pytest.raises(Exception, match="position id out of range"):
        sess.run(None, feeds)


# --- LinearAttention -----------------------------------------------------------

def la_feeds(model, shapes, dtype=np.float32):
    feeds = {}
    for inp in model.graph.input:
        shape = [shapes.get(d.dim_param, d.dim_value) for d in inp.type.tensor_type.shape.dim]
        x = rng.standard_normal(shape).astype(dtype)
        if inp.name == "decay":
            x = -np.abs(x) * 0.5
        if inp.name == "beta":
            x = 1 / (1 + np.exp(-x))
        if inp.name == "key":
            x = x / np.linalg.norm(x.astype(np.float32), axis=-1, keepdims=True).astype(dtype)
        feeds[inp.name] = x.astype(dtype)
    return feeds


@pytest.mark.parametrize("rule,hq,hkv,decay,beta", [
    ("linear", 2, 2, None, None), ("gated", 2, 2, "key", None), ("gated", 2, 2, "head", None),
    ("delta", 2, 1, None, "head"), ("gated_delta", 4, 2, "head", "head"), ("gated_delta", 2, 2, "key", "one")])
@pytest.mark.parametrize("past", [True, False])
def test_linear_attention(rule, hq, hkv, decay, beta, past):
    dk, dv = 4, 3
    widths = {"key": hkv * dk, "head": hkv, "one": 1, None: None}
    m = linear_attention(rule, hq, hkv, dk, dv, 2, 3, past=past, decay_width=widths[decay], beta_width=widths[beta])
    assert_matches_ort(m, la_feeds(m, {}))


def test_linear_attention_fp16_scale_symbolic():
    m = linear_attention("gated_delta", 2, 2, 4, 4, "B", "T", elem=H, decay_width=2, beta_width=2, scale=0.3)
    assert_matches_ort_at_sizes(m, lambda n: la_feeds(m, {"B": 1, "T": n}, np.float16), (1, 5), rtol=1e-2, atol=1e-2)


# --- FlexAttention (ai.onnx.preview) ---------------------------------------------------------------
# onnxruntime has no kernel for it: onnx's reference implementation is the oracle.

def modifier(kind, elem=F):
    """A score_mod / prob_mod body of one kind, taking and giving a (B, H, L, S) tensor of ``elem``."""
    nodes, inits = [], []
    if kind == "bias":
        inits = [helper.make_tensor("bias", elem, [], [0.5])]
        nodes = [helper.make_node("Add", ["x", "bias"], ["y"])]
    elif kind == "soft_cap":
        inits = [helper.make_tensor("cap", elem, [], [2.0])]
        nodes = [helper.make_node("Div", ["x", "cap"], ["t"]), helper.make_node("Tanh", ["t"], ["c"]),
                 helper.make_node("Mul", ["c", "cap"], ["y"])]
    elif kind in ("causal", "relative"):
        # positions from the tensor's shape: query row i, key column j
        inits = [helper.make_tensor(n, TensorProto.INT64, [], [v]) for n, v in (("zero", 0), ("one", 1),
                                                                                 ("two", 2), ("three", 3))]
        inits += [helper.make_tensor("rows", TensorProto.INT64, [2], [-1, 1]),
                  helper.make_tensor("cols", TensorProto.INT64, [2], [1, -1]),
                  helper.make_tensor("neg_inf", elem, [], [-np.inf])]
        nodes = [helper.make_node("Shape", ["x"], ["shape"]),
                 helper.make_node("Gather", ["shape", "two"], ["L"]),
                 helper.make_node("Gather", ["shape", "three"], ["S"]),
                 helper.make_node("Range", ["zero", "L", "one"], ["l"]),
                 helper.make_node("Range", ["zero", "S", "one"], ["s"]),
                 helper.make_node("Reshape", ["l", "rows"], ["i"]), helper.make_node("Reshape", ["s", "cols"], ["j"])]
        if kind == "causal":
            nodes += [helper.make_node("GreaterOrEqual", ["i", "j"], ["keep"]),
                      helper.make_node("Where", ["keep", "x", "neg_inf"], ["y"])]
        else:
            nodes += [helper.make_node("Sub", ["i", "j"], ["d"]), helper.make_node("Cast", ["d"], ["df"], to=elem),
                      helper.make_node("Add", ["x", "df"], ["y"])]
    elif kind == "half":
        inits = [helper.make_tensor("half", elem, [], [0.5])]
        nodes = [helper.make_node("Mul", ["x", "half"], ["y"])]
    elif kind == "identity":
        nodes = [helper.make_node("Identity", ["x"], ["y"])]
    return helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", elem, ["B", "H", "L", "S"])],
                             [helper.make_tensor_value_info("y", elem, ["B", "H", "L", "S"])], inits)


def flex(q, k, v, elem=F, score_mod=None, prob_mod=None, precision_elem=None, **attrs):
    """A FlexAttention model over Q, K, V of these shapes; modifiers by kind (see ``modifier``)."""
    body_elem = precision_elem or (TensorProto.DOUBLE if elem == TensorProto.DOUBLE else F)
    for name, kind in (("score_mod", score_mod), ("prob_mod", prob_mod)):
        if kind is not None:
            attrs[name] = modifier(kind, body_elem)
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", **attrs)
    y = [q[0], q[1], q[2], v[3]]
    return make_model([node], [("Q", elem, q), ("K", elem, k), ("V", elem, v)], [("Y", elem, y)], opset=23,
                      extra_opsets={"ai.onnx.preview": 1})


def flex_feeds(model, sizes=None):
    types = NP | {TensorProto.BFLOAT16: ml_dtypes.bfloat16}
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [(sizes or {}).get(d.dim_param, d.dim_value) for d in t.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(types[t.elem_type])
    return feeds


@pytest.mark.parametrize("score_mod,prob_mod", [(None, None), ("bias", None), ("soft_cap", None), ("causal", None),
                                                ("relative", None), (None, "half"), ("causal", "half"),
                                                ("identity", "identity")])
def test_flex_modifiers(score_mod, prob_mod):
    m = flex([2, 2, 4, 8], [2, 2, 6, 8], [2, 2, 6, 8], score_mod=score_mod, prob_mod=prob_mod)
    matches_reference(m, flex_feeds(m))


@pytest.mark.parametrize("scale", [None, 0.2])
def test_flex_gqa_scale_and_value_head_size(scale):
    attrs = {} if scale is None else {"scale": scale}
    m = flex([2, 6, 3, 8], [2, 2, 5, 8], [2, 2, 5, 4], score_mod="causal", prob_mod="half", **attrs)
    matches_reference(m, flex_feeds(m))


@pytest.mark.parametrize("elem,precision,tol", [(H, None, 2e-3), (H, TensorProto.FLOAT, 2e-3),
                                                (TensorProto.BFLOAT16, None, 2e-2), (TensorProto.DOUBLE, None, 1e-12)])
def test_flex_types(elem, precision, tol):
    attrs = {} if precision is None else {"softmax_precision": precision}
    m = flex([1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], elem=elem, score_mod="soft_cap", prob_mod="half", **attrs)
    matches_reference(m, flex_feeds(m), rtol=tol, atol=tol)


def test_flex_symbolic_dims():
    """Batch and both sequence lengths symbolic, GQA and a causal mask: one build for every size;
    a symbolic head size takes its default scale at run time."""
    m = flex(["b", 4, "l", "e"], ["b", 2, "s", "e"], ["b", 2, "s", 3], score_mod="causal")
    sess = onnxc.InferenceSession(m.SerializeToString())
    for sizes in ({"b": 1, "l": 3, "s": 5, "e": 8}, {"b": 2, "l": 4, "s": 2, "e": 16}):
        feeds = flex_feeds(m, sizes)
        np.testing.assert_allclose(sess.run(None, feeds)[0], ReferenceEvaluator(m).run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("change,message", [
    (lambda m: [m.graph.input[i].type.tensor_type.shape.dim[1].__setattr__("dim_value", 3) for i in (1, 2)],
     "not a multiple"),
    (lambda m: m.graph.node[0].attribute[0].g.input.append(helper.make_tensor_value_info("z", F, None)),
     "one input and one output"),
    (lambda m: m.graph.node[0].attribute[0].g.input[0].type.tensor_type.__setattr__("elem_type", TensorProto.DOUBLE),
     "softmax precision"),
    (lambda m: m.graph.node[0].attribute.append(helper.make_attribute("softmax_precision", TensorProto.INT8)),
     "softmax_precision 3"),
])
def test_flex_invalid_models(change, message):
    m = flex([1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], score_mod="bias")
    change(m)
    with pytest.raises(onnxc.ModelError, match=message):
        onnxc.InferenceSession(m.SerializeToString())
