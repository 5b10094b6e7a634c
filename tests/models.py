"""Models used by tests and benchmarks: the onnx package's light CNN zoo with random
weights, a transformer encoder built from primitive ONNX ops, and BERT and GPT-2 in the node
patterns of PyTorch's exports (what onnxruntime's transformer optimizer fuses)."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from helpers import make_model
from onnxc.benchmarks.models import LIGHT_ZOO, light_model_path, random_weight  # noqa: F401 (re-exported)

def with_random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """Replace ConstantOfShape-made weights with random initializers of the same shape
    (benchmarks' random_weight: He scaling, BatchNorm scale and variance positive). Unlike the
    benchmark models, initializers listed as graph inputs stay inputs."""
    rng = np.random.default_rng(seed)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    bn_positive = {n.input[k] for n in g.node if n.op_type == "BatchNormalization" for k in (1, 4)}
    kept, new_inits = [], []
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            name = node.output[0]
            new_inits.append(numpy_helper.from_array(random_weight(rng, shape, name in bn_positive), name))
        else:
            kept.append(node)
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(new_inits)
    model.ir_version = max(model.ir_version, 4)  # IR 3 would require initializers to be inputs too
    return model


def encoder_block(hidden: int = 64, heads: int = 4, ffn: int = 128, layers: int = 1, vocab: int = 100,
                  seed: int = 0, opset: int = 17) -> onnx.ModelProto:
    """A BERT-style encoder: embedding Gather, attention with a padding mask, GELU (Erf) FFN,
    LayerNormalization, with symbolic batch and sequence dims and shapes computed in-graph."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = [0]

    def const(value, name=None) -> str:
        count[0] += 1
        name = name or f"c{count[0]}"
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(*shape) -> str:
        return const((rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32))

    def node(op, inputs, **attrs) -> str:
        count[0] += 1
        out = f"{op.lower()}_{count[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{count[0]}", **attrs))
        return out

    dh = hidden // heads
    ids_shape = node("Shape", ["input_ids"])
    batch = node("Gather", [ids_shape, const(np.array(0, np.int64))], axis=0)
    seq = node("Gather", [ids_shape, const(np.array(1, np.int64))], axis=0)
    x = node("Gather", [const(rng.standard_normal((vocab, hidden)).astype(np.float32)), "input_ids"], axis=0)
    positions = node("Range", [const(np.array(0, np.int64)), seq, const(np.array(1, np.int64))])
    pos_emb = node("Gather", [const(rng.standard_normal((512, hidden)).astype(np.float32) * 0.1), positions], axis=0)
    x = node("Add", [x, pos_emb])
    # mask: (B, 1, 1, S) additive, from attention_mask (B, S) int64
    mask_bool = node("Equal", ["attention_mask", const(np.array(0, np.int64))])
    mask_bool = node("Unsqueeze", [mask_bool, const(np.array([1, 2], np.int64))])
    mask = node("Where", [mask_bool, const(np.array(-1e4, np.float32)), const(np.array(0.0, np.float32))])
    heads_shape = node("Concat", [node("Unsqueeze", [batch, const(np.array([0], np.int64))]),
                                  node("Unsqueeze", [seq, const(np.array([0], np.int64))]),
                                  const(np.array([heads, dh], np.int64))], axis=0)
    merged_shape = node("Concat", [node("Unsqueeze", [batch, const(np.array([0], np.int64))]),
                                   node("Unsqueeze", [seq, const(np.array([0], np.int64))]),
                                   const(np.array([hidden], np.int64))], axis=0)
    for _ in range(layers):
        def proj(inp, n_out):
            return node("Add", [node("MatMul", [inp, weight(hidden, n_out)]), const(np.zeros(n_out, np.float32))])

        def split_heads(t):
            return node("Transpose", [node("Reshape", [t, heads_shape])], perm=[0, 2, 1, 3])
        q, k, v = (split_heads(proj(x, hidden)) for _ in range(3))
        scores = node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = node("Div", [scores, const(np.array(math.sqrt(dh), np.float32))])
        probs = node("Softmax", [node("Add", [scores, mask])], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merged_shape])
        x = node("LayerNormalization", [node("Add", [x, proj(ctx, hidden)]),
                                        const(np.ones(hidden, np.float32)), const(np.zeros(hidden, np.float32))],
                 axis=-1, epsilon=1e-5)
        h = node("MatMul", [x, weight(hidden, ffn)])
        gelu = node("Mul", [node("Mul", [h, const(np.array(0.5, np.float32))]),
                            node("Add", [node("Erf", [node("Div", [h, const(np.array(math.sqrt(2), np.float32))])]),
                                         const(np.array(1.0, np.float32))])])
        out = node("Add", [node("MatMul", [gelu, weight(ffn, hidden)]), const(np.zeros(hidden, np.float32))])
        # a hand-written layer norm (ReduceMean, Sub, Pow, Sqrt, Div) as exported by older tools
        r = node("Add", [x, out])
        mean = node("ReduceMean", [r], axes=[-1]) if opset < 18 else node("ReduceMean", [r, const(np.array([-1], np.int64))])
        d = node("Sub", [r, mean])
        var = node("ReduceMean", [node("Pow", [d, const(np.array(2.0, np.float32))])], axes=[-1]) if opset < 18 else \
            node("ReduceMean", [node("Pow", [d, const(np.array(2.0, np.float32))]), const(np.array([-1], np.int64))])
        x = node("Div", [d, node("Sqrt", [node("Add", [var, const(np.array(1e-5, np.float32))])])])
    pooled = node("Tanh", [node("Gemm", [node("Cast", [node("Flatten", [node("Slice", [
        x, const(np.array([0], np.int64)), const(np.array([1], np.int64)), const(np.array([1], np.int64))])], axis=1)],
        to=T.FLOAT), weight(hidden, hidden), const(np.zeros(hidden, np.float32))])])
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    nodes.append(helper.make_node("Identity", [pooled], ["pooled"]))
    graph = helper.make_graph(nodes, "encoder",
                              [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"]),
                               helper.make_tensor_value_info("attention_mask", T.INT64, ["batch", "seq"])],
                              [helper.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "seq", hidden]),
                               helper.make_tensor_value_info("pooled", T.FLOAT, ["batch", hidden])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def encoder_feed(batch: int, seq: int, vocab: int = 100, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    if seq > 2:
        mask[0, -2:] = 0
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64), "attention_mask": mask}


def linear_attention(rule, hq, hkv, dk, dv, b, t, elem=T.FLOAT, past=True, decay_width=None, beta_width=None,
                     name=None, **attrs):
    """A LinearAttention node (opset 27) on inputs of the given sizes; the optional inputs where asked."""
    names = ["query", "key", "value", "past_state" if past else ""]
    ins = [("query", elem, [b, t, hq * dk]), ("key", elem, [b, t, hkv * dk]), ("value", elem, [b, t, hkv * dv])]
    if past:
        ins.append(("past_state", elem, [b, hkv, dk, dv]))
    if decay_width:
        names.append("decay")
        ins.append(("decay", elem, [b, t, decay_width]))
    if beta_width:
        names += [""] * (5 - len(names)) + ["beta"]
        ins.append(("beta", elem, [b, t, beta_width]))
    node = helper.make_node("LinearAttention", names, ["output", "present_state"], update_rule=rule,
                            q_num_heads=hq, kv_num_heads=hkv, name=name, **attrs)
    return make_model([node], ins, [("output", elem, [None] * 3), ("present_state", elem, [None] * 4)], opset=27)


def causal_conv(c, k, length, elem=T.FLOAT, bias=False, past=False, activation="none", batch=2, name=None):
    """A CausalConvWithState node (opset 27); bias and past_state where asked."""
    names = ["input", "weight", "bias" if bias else "", "past_state" if past else ""]
    ins = [("input", elem, [batch, c, length]), ("weight", elem, [c, 1, k])]
    if bias:
        ins.append(("bias", elem, [c]))
    if past:
        ins.append(("past_state", elem, [batch, c, k - 1]))
    node = helper.make_node("CausalConvWithState", names if past else [n for n in names if n],
                            ["output", "present_state"], activation=activation, name=name)
    return make_model([node], ins, [("output", elem, [None] * 3), ("present_state", elem, [None] * 3)], opset=27)


def f32(values) -> list[float]:
    """Python floats that float attributes hold exactly."""
    return [float(np.float32(v)) for v in np.ravel(values)]


# kernel_params of an SVM per kernel_type (gamma, coef0, degree)
KERNEL_PARAMS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.3, 0.5, 3.0], "RBF": [0.4, 0.0, 0.0], "SIGMOID": [0.2, 0.1, 0.0]}


def svc_attrs(rng, kernel, classes, proba, pt, f, per_class=None, most=3):
    """Random attributes of an SVMClassifier with int labels: ``per_class`` support vectors of
    ``f`` features per class (1 to ``most`` each if not given); Platt scaling if ``proba``."""
    per_class = per_class or [int(v) for v in rng.integers(1, most + 1, classes)]
    vectors, pairs = sum(per_class), classes * (classes - 1) // 2
    attrs = {"kernel_type": kernel, "kernel_params": KERNEL_PARAMS[kernel],
             "classlabels_ints": [5 + 3 * i for i in range(classes)], "vectors_per_class": per_class,
             "support_vectors": f32(rng.standard_normal(vectors * f)),
             "coefficients": f32(rng.standard_normal((classes - 1) * vectors)),
             "rho": f32(rng.standard_normal(pairs) * 0.3), "post_transform": pt}
    if proba:
        attrs.update(prob_a=f32(-np.abs(rng.standard_normal(pairs)) * 2), prob_b=f32(rng.standard_normal(pairs) * 0.1))
    return attrs


class _ExportGraph:
    """Nodes and random initializers of a model written node by node, each output named after its node."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, name: str, *shape: int, scale: float = 0.2) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, kind: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def layer_norm(self, x: str, name: str, hidden: int, epsilon: float) -> str:
        scale, bias = self.weight(name + "_g", hidden, scale=1.0), self.weight(name + "_b", hidden)
        return self.op("LayerNormalization", [x, scale, bias], name, epsilon=epsilon)


def bert_export(layers: int = 2, hidden: int = 32, heads: int = 2, ffn: int = 64, vocab: int = 50,
                max_positions: int = 16, seed: int = 0) -> onnx.ModelProto:
    """A BERT encoder in the node pattern of PyTorch's export of Hugging Face's BertModel (the
    pattern onnxruntime's transformer optimizer fuses): embeddings, the additive padding mask
    (1 - mask) * -10000, per-head Reshape/Transpose attention, Erf GELU, LayerNormalization."""
    built = _ExportGraph(seed)
    const, w, op, nodes, inits = built.const, built.weight, built.op, built.nodes, built.inits

    def layer_norm(x, p):
        return built.layer_norm(x, p, hidden, 1e-12)

    d = hidden // heads
    words = op("Gather", [w("word_emb", vocab, hidden), "input_ids"], "words")
    seq_len = op("Gather", [op("Shape", ["input_ids"], "ids_shape"), const("one", np.array(1, np.int64))], "seq_len")
    pos_ids = op("Unsqueeze", [op("Range", [const("zero", np.array(0, np.int64)), seq_len,
                                            const("one_step", np.array(1, np.int64))], "pos_range"),
                               const("axes0", np.array([0], np.int64))], "pos_ids")
    pos = op("Gather", [w("pos_emb", max_positions, hidden), pos_ids], "positions")
    seg = op("Gather", [w("seg_emb", 2, hidden), "token_type_ids"], "segments")
    x = layer_norm(op("Add", [op("Add", [words, pos], "emb_sum0"), seg], "emb_sum"), "emb_ln")
    m = op("Unsqueeze", ["attention_mask", const("axes1", np.array([1], np.int64))], "mask3d")
    m = op("Unsqueeze", [m, const("axes2", np.array([2], np.int64))], "mask4d")
    m = op("Cast", [m], "mask_f", to=T.FLOAT)
    m = op("Sub", [const("one_f", np.array(1.0, np.float32)), m], "mask_inv")
    mask = op("Mul", [m, const("neg", np.array(-10000.0, np.float32))], "mask_add")
    split = const("split_heads", np.array([0, 0, heads, d], np.int64))
    merge = const("merge_heads", np.array([0, 0, hidden], np.int64))
    for i in range(layers):
        p = f"l{i}_"
        def proj(name, src):
            return op("Add", [op("MatMul", [src, w(p + name + "_w", hidden, hidden)], p + name + "_mm"),
                              w(p + name + "_b", hidden)], p + name)
        q = op("Transpose", [op("Reshape", [proj("q", x), split], p + "q_r")], p + "q_t", perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [proj("k", x), split], p + "k_r")], p + "k_t", perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [proj("v", x), split], p + "v_r")], p + "v_t", perm=[0, 2, 1, 3])
        sqrt_d = const(p + "sqrt_d", np.array(np.sqrt(d), np.float32))
        s = op("Div", [op("MatMul", [q, k], p + "qk"), sqrt_d], p + "qk_s")
        probs = op("Softmax", [op("Add", [s, mask], p + "qk_m")], p + "probs", axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, v], p + "ctx")], p + "ctx_t", perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, merge], p + "ctx_r")
        attn = op("Add", [op("MatMul", [ctx, w(p + "o_w", hidden, hidden)], p + "o_mm"), w(p + "o_b", hidden)], p + "o")
        x = layer_norm(op("Add", [attn, x], p + "res1"), p + "ln1")
        h = op("Add", [op("MatMul", [x, w(p + "f1_w", hidden, ffn)], p + "f1_mm"), w(p + "f1_b", ffn)], p + "f1")
        g = op("Erf", [op("Div", [h, const(p + "sqrt2", np.array(np.sqrt(2), np.float32))], p + "g_div")], p + "g_erf")
        g = op("Mul", [op("Mul", [h, op("Add", [g, const(p + "g_one", np.array(1.0, np.float32))], p + "g_add")],
                          p + "g_mul"), const(p + "g_half", np.array(0.5, np.float32))], p + "gelu")
        f = op("Add", [op("MatMul", [g, w(p + "f2_w", ffn, hidden)], p + "f2_mm"), w(p + "f2_b", hidden)], p + "f2")
        x = layer_norm(op("Add", [f, x], p + "res2"), p + "ln2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(nodes, "bert", [helper.make_tensor_value_info(n, T.INT64, ["batch", "seq"])
                                              for n in ("input_ids", "token_type_ids", "attention_mask")],
                              [helper.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "seq", hidden])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def gpt2_export(layers: int = 2, hidden: int = 32, heads: int = 2, vocab: int = 50, max_positions: int = 16,
                seed: int = 0) -> onnx.ModelProto:
    """A GPT-2 decoder (no past) in the node pattern of PyTorch's export of Hugging Face's GPT2Model
    (the pattern onnxruntime's transformer optimizer fuses): Conv1D as Reshape -> Gemm -> Reshape,
    the causal mask sliced from a constant by the scores' shape into a Where, tanh GELU."""
    built = _ExportGraph(seed)
    const, w, op, nodes, inits = built.const, built.weight, built.op, built.nodes, built.inits

    def layer_norm(x, p):
        return built.layer_norm(x, p, hidden, 1e-5)

    def linear(x, p, n_in, n_out):
        """Hugging Face's Conv1D as PyTorch exports it: Reshape to rows, Gemm, Reshape back."""
        rows = op("Reshape", [x, const(p + "_rows", np.array([-1, n_in], np.int64))], p + "_r")
        y = op("Gemm", [rows, w(p + "_w", n_in, n_out), w(p + "_b", n_out)], p + "_gemm")
        lead = op("Shape", [x], p + "_lead", start=0, end=2)
        shape = op("Concat", [lead, const(p + "_width", np.array([n_out], np.int64))], p + "_shape", axis=0)
        return op("Reshape", [y, shape], p)

    d = hidden // heads
    seq_len = op("Gather", [op("Shape", ["input_ids"], "ids_shape"), const("one", np.array(1, np.int64))], "seq_len")
    pos_ids = op("Unsqueeze", [op("Range", [const("zero", np.array(0, np.int64)), seq_len,
                                            const("step", np.array(1, np.int64))], "pos_range"),
                               const("axes0", np.array([0], np.int64))], "pos_ids")
    h = op("Add", [op("Gather", [w("wte", vocab, hidden), "input_ids"], "tok"),
                   op("Gather", [w("wpe", max_positions, hidden), pos_ids], "pos")], "emb")
    causal = const("causal_bias", np.tril(np.ones((max_positions, max_positions), bool))[None, None])

    def causal_mask(scores, p):
        """bias[:, :, key_len - query_len:key_len, :key_len] from the scores' shape, as GPT-2 slices it."""
        dims = op("Shape", [scores], p + "scores_shape")
        def dim(axis):
            return op("Squeeze", [op("Slice", [dims, const(f"{p}at{axis}", np.array([axis], np.int64)),
                                               const(f"{p}to{axis}", np.array([axis + 1], np.int64))],
                                     f"{p}dim{axis}_1d")], f"{p}dim{axis}")
        key_len, query_len = dim(3), dim(2)
        axes0 = const(p + "axes0", np.array([0], np.int64))
        start = op("Unsqueeze", [op("Sub", [key_len, query_len], p + "first_row"), axes0], p + "first_row_1d")
        end = op("Unsqueeze", [key_len, axes0], p + "key_len_1d")
        rows = op("Slice", [causal, start, end, const(p + "axis2", np.array([2], np.int64))], p + "mask_rows")
        return op("Slice", [rows, const(p + "zero_1d", np.array([0], np.int64)), end,
                            const(p + "axis3", np.array([3], np.int64))], p + "mask")
    split_heads = const("split_heads", np.array([0, 0, heads, d], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))
    for i in range(layers):
        p = f"h{i}_"
        qkv = linear(layer_norm(h, p + "ln1"), p + "c_attn", hidden, 3 * hidden)
        q, k, v = (f"{p}{t}" for t in "qkv")
        nodes.append(helper.make_node("Split", [qkv, const(p + "split", np.array([hidden] * 3, np.int64))], [q, k, v],
                                      name=p + "split", axis=2))
        q = op("Transpose", [op("Reshape", [q, split_heads], p + "q_r")], p + "q_t", perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [k, split_heads], p + "k_r")], p + "k_t", perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [v, split_heads], p + "v_r")], p + "v_t", perm=[0, 2, 1, 3])
        sqrt_d = const(p + "sqrt_d", np.array(np.sqrt(d), np.float32))
        s = op("Div", [op("MatMul", [q, k], p + "qk"), sqrt_d], p + "qk_s")
        s = op("Where", [causal_mask(s, p), s, const(p + "masked", np.array(-10000.0, np.float32))], p + "qk_m")
        ctx = op("MatMul", [op("Softmax", [s], p + "probs", axis=-1), v], p + "ctx")
        ctx = op("Reshape", [op("Transpose", [ctx], p + "ctx_t", perm=[0, 2, 1, 3]), merge_heads], p + "ctx_r")
        h = op("Add", [linear(ctx, p + "c_proj", hidden, hidden), h], p + "res1")
        f = linear(layer_norm(h, p + "ln2"), p + "c_fc", hidden, 4 * hidden)
        cube = op("Mul", [op("Pow", [f, const(p + "three", np.array(3.0, np.float32))], p + "pow"),
                          const(p + "c0447", np.array(0.044715, np.float32))], p + "cube")
        inner = op("Mul", [op("Add", [f, cube], p + "inner0"),
                           const(p + "c0797", np.array(np.sqrt(2 / np.pi), np.float32))], p + "inner")
        gelu = op("Mul", [op("Mul", [const(p + "half", np.array(0.5, np.float32)), f], p + "half_x"),
                          op("Add", [const(p + "one_f", np.array(1.0, np.float32)), op("Tanh", [inner], p + "tanh")],
                             p + "one_plus")], p + "gelu")
        h = op("Add", [linear(gelu, p + "mlp_proj", 4 * hidden, hidden), h], p + "res2")
    out = layer_norm(h, "ln_f")
    nodes.append(helper.make_node("Identity", [out], ["last_hidden_state"]))
    graph = helper.make_graph(nodes, "gpt2", [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"])],
                              [helper.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "seq", hidden])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
