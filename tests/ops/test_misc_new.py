"""LinearAttention, CausalConvWithState, BitCast, DeformConv, TensorScatter, TfIdfVectorizer against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort
from models import causal_conv, linear_attention

rng = np.random.default_rng(0)
F = TP.FLOAT


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def check_sizes(model, feeds_for, sizes, rtol=1e-4, atol=1e-5):
    """One onnxc session run at several sizes of a symbolic dim, each compared with onnxruntime."""
    sess = onnxc.InferenceSession(model.SerializeToString())
    for n in sizes:
        feeds = feeds_for(n)
        for a, e in zip(sess.run(None, feeds), run_ort(model, feeds)):
            assert a.shape == e.shape
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


# --- LinearAttention -----------------------------------------------------------

def la_feeds(model, shapes, dtype=np.float32):
    feeds = {}
    for inp in model.graph.input:
        shape = [shapes.get(d.dim_param, d.dim_value) for d in inp.type.tensor_type.shape.dim]
        x = rand(*shape, dtype=dtype)
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
    m = linear_attention("gated_delta", 2, 2, 4, 4, "B", "T", elem=TP.FLOAT16, decay_width=2, beta_width=2,
                         scale=0.3)
    check_sizes(m, lambda n: la_feeds(m, {"B": 1, "T": n}, np.float16), (1, 5), rtol=1e-2, atol=1e-2)


# --- CausalConvWithState -------------------------------------------------------

@pytest.mark.parametrize("k,length,bias,past,activation", [
    (4, 6, False, False, "none"), (4, 6, True, True, "silu"), (4, 2, False, True, "none"), (4, 2, True, False, "silu"),
    (1, 3, True, False, "none"), (2, 1, False, True, "silu")])
def test_causal_conv(k, length, bias, past, activation):
    m = causal_conv(3, k, length, bias=bias, past=past, activation=activation)
    assert_matches_ort(m, {i.name: rand(*[d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input})


def test_causal_conv_fp16_symbolic():
    m = causal_conv(3, 3, "L", elem=TP.FLOAT16, bias=True, past=True, activation="swish", batch="B")

    def feeds(n):
        return {"input": rand(2, 3, n, dtype=np.float16), "weight": rand(3, 1, 3, dtype=np.float16),
                "bias": rand(3, dtype=np.float16), "past_state": rand(2, 3, 2, dtype=np.float16)}
    check_sizes(m, feeds, (1, 7), rtol=1e-2, atol=1e-2)


# --- BitCast -------------------------------------------------------------------

@pytest.mark.parametrize("src,to", [(np.float32, TP.INT32), (np.int64, TP.DOUBLE), (np.uint16, TP.FLOAT16),
                                    (np.float16, TP.BFLOAT16), (np.int8, TP.UINT8), (np.uint8, TP.BOOL),
                                    (np.uint32, TP.FLOAT)])
def test_bitcast(src, to):
    x = (rng.integers(0, 2, (2, 5)) if src == np.uint8 else rng.integers(-100, 100, (2, 5))).astype(src)
    if src in (np.float32, np.float16):
        x = rand(2, 5, dtype=src)
    m = make_model([helper.make_node("BitCast", ["x"], ["y"], to=to)],
                   [("x", helper.np_dtype_to_tensor_dtype(x.dtype), ["N", 5])], [("y", to, [None, 5])], opset=26)
    y = onnxc.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    expected = x.view(helper.tensor_dtype_to_np_dtype(to))
    assert y.dtype == expected.dtype and y.shape == expected.shape
    assert y.tobytes() == expected.tobytes()


def test_bitcast_rejects_width_change():
    m = make_model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT64)], [("x", F, [3])], [("y", TP.INT64, [3])],
                   opset=26)
    with pytest.raises(Exception, match="width"):
        onnxc.InferenceSession(m.SerializeToString())


# --- DeformConv ----------------------------------------------------------------

def deform_conv(n, c, h, w, oc, kh, kw, oh, ow, elem=F, bias=False, mask=False, offset_group=1, **attrs):
    names = ["X", "W", "offset", "B" if bias else "", "mask" if mask else ""]
    ins = [("X", elem, [n, c, h, w]), ("W", elem, [oc, c // attrs.get("group", 1), kh, kw]),
           ("offset", elem, [n, offset_group * kh * kw * 2, oh, ow])]
    if bias:
        ins.append(("B", elem, [oc]))
    if mask:
        ins.append(("mask", elem, [n, offset_group * kh * kw, oh, ow]))
    node = helper.make_node("DeformConv", [x for x in names if x], ["Y"], offset_group=offset_group, **attrs)
    return make_model([node], ins, [("Y", elem, [None] * 4)], opset=22)


def dc_feeds(model, n=None, dtype=np.float32):
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value if d.dim_param == "" else n for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = (rand(*shape) * (2 if i.name == "offset" else 1)).astype(dtype)
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
    assert_matches_ort(m, dc_feeds(m))


def test_deform_conv_double_symbolic():
    m = deform_conv("N", 2, 4, 4, 3, 2, 2, 3, 3, elem=TP.DOUBLE, bias=True, mask=True)
    check_sizes(m, lambda n: dc_feeds(m, n, np.float64), (1, 3), rtol=1e-9, atol=1e-9)


# --- TensorScatter -------------------------------------------------------------

def tensor_scatter(past_shape, update_shape, elem=F, indices=True, **attrs):
    names = ["past_cache", "update"] + (["write_indices"] if indices else [])
    ins = [("past_cache", elem, past_shape), ("update", elem, update_shape)]
    if indices:
        ins.append(("write_indices", TP.INT64, [past_shape[0]]))
    return make_model([helper.make_node("TensorScatter", names, ["present_cache"], **attrs)], ins,
                      [("present_cache", elem, [None] * len(past_shape))], opset=24)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis,past,update", [(-2, (2, 3, 6, 4), (2, 3, 2, 4)), (1, (2, 5, 3), (2, 3, 3)),
                                              (-1, (3, 2, 4), (3, 2, 1))])
def test_tensor_scatter(mode, axis, past, update):
    m = tensor_scatter(list(past), list(update), mode=mode, axis=axis)
    top = past[axis] - update[axis]
    # circular indices wrap past the end; onnxruntime rejects negative ones, so none are drawn here
    indices = np.random.default_rng(len(past)).integers(0, top + 3 if mode == "circular" else top + 1, past[0])
    assert_matches_ort(m, {"past_cache": rand(*past), "update": rand(*update), "write_indices": indices})


@pytest.mark.parametrize("dtype,elem", [(np.int32, TP.INT32), (np.uint8, TP.UINT8), (np.float16, TP.FLOAT16)])
def test_tensor_scatter_dtypes_no_indices(dtype, elem):
    m = tensor_scatter([2, 4, 3], [2, 2, 3], elem=elem, indices=False)
    assert_matches_ort(m, {"past_cache": (rand(2, 4, 3) * 10).astype(dtype), "update": (rand(2, 2, 3) * 10).astype(dtype)})


def test_tensor_scatter_symbolic_and_range_check():
    m = tensor_scatter(["B", 8, 2], ["B", "S", 2])
    sess = onnxc.InferenceSession(m.SerializeToString())
    for b, s in ((1, 3), (3, 1)):
        feeds = {"past_cache": rand(b, 8, 2), "update": rand(b, s, 2), "write_indices": rng.integers(0, 8 - s, b)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(m, feeds)[0])
    feeds = {"past_cache": rand(1, 8, 2), "update": rand(1, 3, 2), "write_indices": np.array([6])}
    with pytest.raises(Exception, match="write index"):
        sess.run(None, feeds)


# --- TfIdfVectorizer -----------------------------------------------------------

POOL = dict(pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7], ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6])


WEIGHTS = [0.5, 1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("mode,weights,min_len,max_len,skip,elem,dtype", [
    ("TF", None, 1, 1, 0, TP.INT32, np.int32), ("TF", None, 1, 2, 3, TP.INT64, np.int64),
    ("IDF", None, 2, 2, 0, TP.INT64, np.int64), ("TFIDF", None, 1, 2, 1, TP.INT32, np.int32),
    ("IDF", WEIGHTS, 1, 2, 2, TP.INT64, np.int64), ("TFIDF", WEIGHTS, 2, 2, 3, TP.INT32, np.int32)])
def test_tfidf(mode, weights, min_len, max_len, skip, elem, dtype):
    attrs = dict(POOL, mode=mode, min_gram_length=min_len, max_gram_length=max_len, max_skip_count=skip)
    if weights:
        attrs["weights"] = weights
    m = make_model([helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)], [("X", elem, [2, 12])],
                   [("Y", F, [2, 7])], opset=9)
    assert_matches_ort(m, {"X": rng.integers(1, 9, (2, 12)).astype(dtype)})


def test_tfidf_1d_symbolic():
    attrs = dict(POOL, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=1)
    m = make_model([helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)], [("X", TP.INT64, ["C"])],
                   [("Y", F, [7])], opset=9)
    check_sizes(m, lambda n: {"X": rng.integers(1, 9, n).astype(np.int64)}, (1, 20))
