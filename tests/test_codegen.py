"""Code generation pieces: memory planning, C expressions, generated source layout."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from onnxc.codegen import cexpr, memory


def test_memory_plan_reuses_dead_buffers():
    # a -> b -> c -> d chain: a is dead once c is made, so c can take a's bytes
    bufs = [memory.Buffer(1, 1000, 0, 1), memory.Buffer(2, 1000, 1, 2), memory.Buffer(3, 1000, 2, 3),
            memory.Buffer(4, 1000, 3, 4)]
    offsets, arena = memory.plan(bufs)
    assert arena == 2 * 1024
    for x, y in ((1, 2), (2, 3), (3, 4)):
        assert offsets[x] != offsets[y]
    for off in offsets.values():
        assert off % memory.ALIGN == 0


def test_memory_plan_never_overlaps_live_buffers():
    rng = np.random.default_rng(0)
    bufs = []
    for key in range(60):
        first = int(rng.integers(0, 40))
        bufs.append(memory.Buffer(key, int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 10))))
    offsets, arena = memory.plan(bufs)
    for a in bufs:
        for b in bufs:
            if a.key < b.key and not (a.last < b.first or b.last < a.first):
                a0, b0 = offsets[a.key], offsets[b.key]
                assert a0 + a.size <= b0 or b0 + b.size <= a0
    assert arena <= sum((b.size + 63) // 64 * 64 for b in bufs)


def test_memory_plan_puts_in_place_chains_in_one_range():
    # 1 -> 2 -> 3 written in place, 4 lives alongside all of them
    bufs = [memory.Buffer(1, 1000, 0, 1), memory.Buffer(2, 1000, 1, 2), memory.Buffer(3, 1000, 2, 5),
            memory.Buffer(4, 500, 0, 5)]
    offsets, arena = memory.plan(bufs, shares={2: 1, 3: 2})
    assert offsets[1] == offsets[2] == offsets[3] != offsets[4]
    assert arena == 1024 + 512


def _chain_model():
    """x -> Exp -> a -> Sigmoid -> b -> Neg -> c; y = c + a (a stays alive until the end)."""
    nodes = [helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["c"]), helper.make_node("Add", ["c", "a"], ["y"])]
    return make_model(nodes, [("x", T.FLOAT, [64, 64])], [("y", T.FLOAT, [64, 64])])


def test_elementwise_outputs_are_written_over_inputs_that_die(tmp_path):
    import onnxruntime as ort
    model = _chain_model()
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC  # no fusion: four nodes
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    # a lives to the end; b dies at Neg, which writes c over it: two 16 KiB buffers, not three
    assert sess._model.manifest["arena_bytes"] == 2 * 64 * 64 * 4
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-6, atol=1e-6)


def test_a_reshape_of_a_dying_tensor_takes_its_memory_and_copies_nothing():
    """Transpose -> Reshape -> Transpose (a channel shuffle): the Reshape's output is planned
    over its input, so the arena holds two buffers, and the copy is skipped."""
    import onnxruntime as ort
    shape = helper.make_tensor("shape", T.INT64, [3], [8, 16, 16])
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                        helper.make_node("Reshape", ["t", "shape"], ["r"]),
                        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1])],
                       [("x", T.FLOAT, [4, 8, 64])], [("y", T.FLOAT, [8, 16, 16])], [shape])
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    assert sess._model.manifest["arena_bytes"] == 4 * 8 * 64 * 4    # t and r: one buffer
    x = np.random.default_rng(0).standard_normal((4, 8, 64)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


def test_concat_inputs_are_planned_inside_its_output_and_copied_nowhere():
    """A DenseNet-style chain c2 = Concat(c1 = Concat(a, b), f): a, b, c1 and f are written
    in their places inside c2, which the arena holds with r and then h. c2 dies at a Relu
    that must not write r over it (b, inside it, is read later), b dies at an Exp that must
    not write h over it, and a, joined twice in y3, is copied there."""
    import onnxruntime as ort
    n = helper.make_node
    model = make_model([n("Sigmoid", ["x"], ["a"]), n("Tanh", ["x"], ["b"]), n("Concat", ["a", "b"], ["c1"], axis=1),
                        n("Neg", ["c1"], ["f"]), n("Concat", ["c1", "f"], ["c2"], axis=1),
                        n("Relu", ["c2"], ["r"]), n("Mul", ["r", "r"], ["y2"]),
                        n("Exp", ["b"], ["h"]), n("Mul", ["h", "h"], ["y1"]),
                        n("Concat", ["a", "a"], ["y3"], axis=1)],
                       [("x", T.FLOAT, [1, 4, 8, 8])],
                       [("y1", T.FLOAT, [1, 4, 8, 8]), ("y2", T.FLOAT, [1, 16, 8, 8]), ("y3", T.FLOAT, [1, 8, 8, 8])])
    so = onnxc.SessionOptions()
    so.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = onnxc.InferenceSession(model.SerializeToString(), so)
    assert sess._model.manifest["arena_bytes"] == 2 * 16 * 64 * 4   # c2; r, then h
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    for got, want in zip(sess.run(None, {"x": x}), ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_fused_node_comment_names_the_nodes_it_replaces(tmp_path):
    m = make_model([helper.make_node("Add", ["x", "x"], ["t"], name="first add"),
                    helper.make_node("Relu", ["t"], ["y"], name="the relu")],
                   [("x", T.FLOAT, ["n", 4])], [("y", T.FLOAT, ["n", 4])])
    onnxc.compile_model(m, tmp_path)
    source = (tmp_path / "model.c").read_text()
    assert "/* onnxc::FusedElementwise 'the relu' = Add 'first add' -> Relu 'the relu': float[n,4] -> float[n,4] */" \
        in source
    assert "static int node0_FusedElementwise_the_relu(" in source and "node1" not in source


def test_cexpr_folds_constants():
    assert cexpr.mul(2, 3, "n") == "(6 * n)"
    assert cexpr.mul(1, "n") == "n"
    assert cexpr.mul(0, "n") == 0
    assert cexpr.add(1, 2) == 3
    assert cexpr.strides([2, "n", 4]) == ["(4 * n)", 4, 1]
    assert cexpr.lit(2**40) == "INT64_C(1099511627776)"


def test_generated_source_has_one_commented_function_per_node(tmp_path):
    m = make_model([helper.make_node("Add", ["x", "x"], ["t"], name="first add"),
                    helper.make_node("Relu", ["t"], ["y"], name="the relu")],
                   [("x", T.FLOAT, ["n", 4])], [("y", T.FLOAT, ["n", 4])])
    # (at BASIC: EXTENDED would fuse the two into one loop, as the next test shows)
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=1), command="onnxc compile m.onnx")
    source = (tmp_path / "model.c").read_text()
    assert source.startswith("/* Generated by onnxc")
    assert "/* Add 'first add': float[n,4], float[n,4] -> float[n,4] */" in source
    assert "static int node0_Add_first_add(" in source
    assert "/* Relu 'the relu'" in source and "static int node1_Relu_the_relu(" in source
    assert "model_run(" in source
    # the fixed dim stays a constant, the symbolic one is a run-time variable
    assert "dim_n" in source and "i < (4 * dim_n)" in source


def _split_model():
    """Nodes of several kernel families, a Loop whose body calls node functions, string
    outputs: what the units of a split build call across each other."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                 helper.make_tensor_value_info("acc_in", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [2, 3])])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Relu", ["h"], ["step"]),
             helper.make_node("Loop", ["n", "", "x"], ["acc"], body=body),
             helper.make_node("Softmax", ["acc"], ["p"], axis=1),
             helper.make_node("ReduceSum", ["p"], ["s"], keepdims=0),
             helper.make_node("Cast", ["s"], ["text"], to=T.STRING)]
    w = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
    return make_model(nodes, [("x", T.FLOAT, [2, 3]), ("n", T.INT64, [])],
                      [("p", T.FLOAT, [2, 3]), ("text", T.STRING, [2])],
                      initializers=[helper.make_tensor("w", T.FLOAT, w.shape, w.ravel())])


def test_split_build_runs_as_one_unit(monkeypatch, tmp_path):
    """A model's node functions compiled as several translation units in parallel, built for
    threads and profiling, compute what onnxruntime does; each unit is reported as built."""
    from helpers import run_ort

    from onnxc import driver
    from onnxc.codegen import units
    from onnxc.driver import CompileOptions, compile_model
    model = _split_model()
    feeds = {"x": np.array([[1, -2, 3], [0.5, 0, -1]], np.float32), "n": np.array(3, np.int64)}
    monkeypatch.setattr(units, "UNIT_BYTES", 1)
    monkeypatch.setattr(driver, "usable_cores", lambda: 3)   # (as many units as the build has cores)
    events = []
    compile_model(model, tmp_path, CompileOptions(threads=2, profile=True),
                  on_stage=lambda stage, info: events.append((stage, info)))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert {"model_common.h", "model_nodes_1.c", "model_nodes_2.c"} <= set(files)
    compiled = [info for stage, info in events if stage == "compile"]
    assert len(compiled) == len([f for f in files if f.endswith(".c")]) >= 3
    assert [info["done"] for info in compiled] == list(range(1, len(compiled) + 1))
    assert [stage for stage, _ in events][-1] == "link"
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 2
    so.enable_profiling = True
    actual = onnxc.InferenceSession(str(tmp_path), so).run(None, feeds)
    expected = run_ort(model, feeds)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5)
    assert actual[1].tolist() == expected[1].tolist()
