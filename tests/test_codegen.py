"""Code generation pieces: memory planning, C expressions, generated source layout."""
from __future__ import annotations

import os
import re
from importlib import resources

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort
from onnxc.codegen import cexpr, memory, steps
from onnxc.codegen.templates import environment


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
    assert cexpr.round_up(5, 4) == 8 and cexpr.div(-7, 2) == -3   # (C division truncates)


def test_a_size_expression_carries_its_dims_and_value_as_data():
    """A size built from dim variables names them and is evaluated from how it was built, as
    C computes it (truncating division, the onnxc_dim_* helpers); text it was built from that
    is not a dim variable leaves it without symbols or value."""
    from onnxc.codegen.uses import Uses
    uses = Uses()
    n, m = uses.dim("dim_n"), uses.dim("dim_m")
    rows = cexpr.call("onnxc_dim_max", 1, cexpr.div(1000, cexpr.mul(3, cexpr.call("onnxc_dim_max", 1, m))))
    size = cexpr.add(cexpr.mul(2**40, rows, n), cexpr.round_up(n, 4), -1)
    assert size == "((INT64_C(1099511627776) * onnxc_dim_max(1, 1000 / (3 * onnxc_dim_max(1, dim_m))) * dim_n)" \
        " + ((dim_n + 3) / 4 * 4) + -1)"
    assert cexpr.symbols(size) == size.symbols == {"dim_n", "dim_m"} and cexpr.symbols(7) == set()
    assert size.evaluate({"dim_n": 5, "dim_m": 7}) == 2**40 * 47 * 5 + 8 - 1
    assert cexpr.evaluate(size, {"dim_n": 1, "dim_m": 0}) == 2**40 * 333 + 4 - 1
    assert cexpr.mul(cexpr.div(n, m), 3) == "(3 * (dim_n / dim_m))"   # a quotient keeps its parentheses
    assert cexpr.evaluate(cexpr.div(n, m), {"dim_n": -7, "dim_m": 2}) == -3
    with pytest.raises(ValueError):
        cexpr.evaluate(size, {"dim_n": 5})
    with pytest.raises(ValueError):
        cexpr.evaluate(cexpr.div(n, m), {"dim_n": 5, "dim_m": 0})
    opaque = cexpr.mul(n, n + " - 1")   # (``+`` makes text, not a size)
    assert opaque == "(dim_n * dim_n - 1)" and cexpr.symbols(opaque) is None and cexpr.symbols("dim_n") is None
    with pytest.raises(ValueError):
        cexpr.evaluate(opaque, {"dim_n": 5})


def test_every_step_kind_has_a_macro_in_each_backend():
    """The run function's steps are rendered by one macro per kind per backend: the C build's
    (inputs copied to the device are the CUDA build's only), and the CUDA build's, which takes
    C's for the kinds it spells the same."""
    kinds = {cls.kind for cls in vars(steps).values()
             if isinstance(cls, type) and issubclass(cls, steps.Step) and cls is not steps.Step}
    c_macros = environment().get_template("c/steps.j2").make_module({}).macros
    cuda_macros = environment().get_template("cuda/steps.j2").make_module({}).macros
    assert set(c_macros) == kinds - {steps.ToDevice.kind}
    assert set(cuda_macros) == kinds


def test_the_c_model_templates_hold_no_cuda_branch():
    """What a CUDA build spells differently lives under templates/cuda/ (blocks of model.cu.j2,
    the macros of cuda/steps.j2), never as a test inside the C templates it extends."""
    folder = resources.files("onnxc.templates") / "c"
    names = ["model.c.j2", "model_support.j2", "model_nodes.c.j2", "model_common.h.j2", "node_function.j2",
             "control_flow.j2", "steps.j2"]
    for name in names:
        text = (folder / name).read_text()
        assert not re.search(r"\{[{%][^}]*\bcuda\b", text), name


def _substantive_lines(folder) -> dict[str, list[str]]:
    """Template line (stripped) -> the templates under ``folder`` that hold it: lines of 25
    characters or more that are not Jinja statements or comments, nor C comments."""
    lines: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.j2")):
        for line in path.read_text().splitlines():
            text = line.strip()
            if len(text) >= 25 and not text.startswith(("{%", "{#", "//", "/*", "*")):
                lines.setdefault(text, []).append(path.name)
    return lines


def test_cuda_templates_do_not_repeat_the_c_kernel_bodies():
    """A kernel body is written once (templates/kernels/), rendered inside each backend's loop
    shell: at most 150 substantive lines of templates/cuda/ stand verbatim in templates/c/
    (708 did before the bodies were shared)."""
    import pathlib
    root = pathlib.Path(str(resources.files("onnxc.templates")))
    c, cuda = _substantive_lines(root / "c"), _substantive_lines(root / "cuda")
    repeated = {line: names for line, names in cuda.items() if line in c}
    count = sum(len(names) for names in repeated.values())
    by_template: dict[str, int] = {}
    for names in repeated.values():
        for name in names:
            by_template[name] = by_template.get(name, 0) + 1
    assert count <= 150, sorted(by_template.items(), key=lambda kv: -kv[1])[:15]


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


def test_nodes_with_the_same_code_share_one_function(tmp_path):
    """Repeated blocks (a transformer's layers) are compiled once: a node whose function would
    be the same text as one already written calls that one, named at its call and in that
    function's comment; a node whose code differs (another size) gets its own."""
    rng = np.random.default_rng(3)
    w = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"w{i}") for i in range(3)]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["a"], name="layer0"),
             helper.make_node("Tanh", ["a"], ["b"], name="act0"),
             helper.make_node("MatMul", ["b", "w1"], ["c"], name="layer1"),
             helper.make_node("Tanh", ["c"], ["d"], name="act1"),
             helper.make_node("MatMul", ["d", "w2"], ["e"], name="layer2"),
             helper.make_node("Slice", ["e", "starts", "ends"], ["f"], name="half"),
             helper.make_node("Tanh", ["f"], ["y"], name="act_half")]
    inits = w + [numpy_helper.from_array(np.array([0], np.int64), "starts"),
                 numpy_helper.from_array(np.array([2], np.int64), "ends")]
    m = make_model(nodes, [("x", T.FLOAT, [4, 8])], [("y", T.FLOAT, [2, 8])], inits)
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=1))
    source = (tmp_path / "model.c").read_text()
    defined = re.findall(r"ONNXC_NODE static int (\w+)\(", source)
    assert [d for d in defined if "MatMul" in d] == ["node0_MatMul_layer0"]
    assert [d for d in defined if "Tanh" in d] == ["node1_Tanh_act0", "node6_Tanh_act_half"]   # (2 x 8: its own)
    assert "also runs MatMul 'layer1' (the same code)" in source and "also runs MatMul 'layer2'" in source
    assert "also runs Tanh 'act1' (the same code)" in source
    run = source[source.index("static int run_graph("):]
    assert run.count("rc = node0_MatMul_layer0(") == 3 and "/* MatMul 'layer2' */" in run
    x = rng.standard_normal((4, 8)).astype(np.float32)
    got = onnxc.InferenceSession(str(tmp_path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def _layers_of_made_up_dims() -> onnx.ModelProto:
    """Three layers whose sizes the graph names with symbols of its own: each Reshape's output
    (-1 rows) gets a fresh one, as a transformer's export gives each layer its own."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(np.array([-1, 8], np.int64), "rows")]
    nodes, x = [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Reshape", [x, "rows"], [f"r{i}"], name=f"flat{i}"),
                  helper.make_node("MatMul", [f"r{i}", f"w{i}"], [f"m{i}"], name=f"layer{i}"),
                  helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"act{i}"),
                  helper.make_node("Reshape", [f"t{i}", "shape"], [f"y{i}" if i < 2 else "y"], name=f"back{i}")]
        x = f"y{i}"
    return make_model(nodes, [("x", T.FLOAT, ["batch", 4, 8]), ("shape", T.INT64, [3])],
                      [("y", T.FLOAT, ["batch", 4, 8])], inits)


def test_nodes_whose_sizes_the_graph_names_differently_share_one_function(tmp_path):
    """A node function names the dims its model does not (symbols the compiler made up) dim_1,
    dim_2... in the order it first names them, and keeps a named input dim's name: layers
    whose sizes have their own symbols then share one function, and each call passes its
    own layer's dims."""
    m = _layers_of_made_up_dims()
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=1))
    source = (tmp_path / "model.c").read_text()
    defined = re.findall(r"ONNXC_NODE static int (\w+)\(([^)]*)\)", source)
    matmuls = [(name, params) for name, params in defined if "MatMul" in name]
    assert len(matmuls) == 1 and "int64_t dim_1" in matmuls[0][1], defined
    assert len([name for name, _ in defined if "Tanh" in name]) == 1
    run = source[source.index("static int run_graph("):]
    calls = re.findall(r"rc = (node\d+_MatMul_\w+)\(ctx, (dim_\w+),", run)
    assert len(calls) == 3 and len({fn for fn, _ in calls}) == 1 and len({dim for _, dim in calls}) == 3, calls
    assert "int64_t dim_batch" in source   # (a dim the model names keeps its name)
    rng = np.random.default_rng(6)
    for batch in (1, 3):
        feeds = {"x": rng.standard_normal((batch, 4, 8)).astype(np.float32), "shape": np.array([batch, 4, 8])}
        got = onnxc.InferenceSession(str(tmp_path)).run(None, feeds)[0]
        np.testing.assert_allclose(got, run_ort(m, feeds)[0], rtol=1e-5, atol=1e-6)


def test_a_node_whose_scratch_size_cannot_be_renamed_names_the_graphs_dims(tmp_path, monkeypatch):
    """Scratch is sized where the graph calls the node, in the graph's dim variables: where
    a size cannot be built again in them (text a lowering formatted), the node is lowered
    again naming the graph's dims, and still computes what onnxruntime does."""
    from onnxc.codegen import cexpr
    monkeypatch.setattr(cexpr, "rename", lambda x, names: None)
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                    helper.make_node("Relu", ["c"], ["y"], name="relu")],
                   [("x", T.FLOAT, ["batch", 3, "h", 9])], [("y", T.FLOAT, ["batch", 4, "h", 9])], [w])
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=1))
    source = (tmp_path / "model.c").read_text()
    conv = re.search(r"ONNXC_NODE static int (\w*Conv\w*)\(([^)]*)\)", source)
    assert conv and "dim_h" in conv.group(2) and "scratch" in conv.group(2), conv
    x = rng.standard_normal((2, 3, 5, 9)).astype(np.float32)
    got = onnxc.InferenceSession(str(tmp_path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_size_expression_is_built_again_in_other_dim_variables():
    """cexpr.rename: the same operations over the renamed variables (its symbols and value
    follow), text a lowering formatted around a dim variable refused (None)."""
    from onnxc.codegen import cexpr
    from onnxc.codegen.uses import DimVar, Uses, fill
    uses = Uses()
    a, b = uses.dim("dim_1"), uses.dim("dim_2")
    size = cexpr.add(cexpr.round_up(cexpr.mul(4, a, cexpr.div(b, 2)), 64),
                     cexpr.call("onnxc_dim_max", a, 8), 16)
    names = {"dim_1": DimVar("dim_rows"), "dim_2": DimVar("dim_cols")}
    renamed = cexpr.rename(size, names)
    assert cexpr.symbols(renamed) == {"dim_rows", "dim_cols"}
    assert "dim_1" not in str(renamed) and "dim_rows" in str(renamed)
    assert cexpr.evaluate(renamed, {"dim_rows": 5, "dim_cols": 7}) == cexpr.evaluate(size, {"dim_1": 5, "dim_2": 7})
    assert cexpr.rename(12, names) == 12 and cexpr.rename(DimVar("dim_other"), names) == "dim_other"
    assert cexpr.rename(fill("{} * 4", a), names) is None and cexpr.rename(cexpr.mul(fill("{} * 4", a), b), names) is None
    assert cexpr.rename("sizeof(float)", names) == "sizeof(float)"


def test_a_value_no_memory_can_hold_fails_the_run_clearly_and_the_session_runs_on(tmp_path):
    """A value of a run-time size gets its memory through onnxc_slot_alloc: a size no address
    space holds (2^62 bytes) fails the run with "out of memory", and the next run works."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0)]
    m = make_model(nodes, [("shape", T.INT64, [2])], [("s", T.FLOAT, [])])
    onnxc.compile_model(m, tmp_path)
    source = (tmp_path / "model.c").read_text()
    run = source[source.index("static int run_graph("):]
    assert "onnxc_slot_alloc(ctx, &heap[" in run and "onnxc_node_ended(ctx, &rc)" in run
    session = onnxc.InferenceSession(str(tmp_path))
    with pytest.raises(onnxc.RuntimeFailure, match="out of memory"):
        session.run(None, {"shape": np.array([1 << 30, 1 << 30])})
    assert session.run(None, {"shape": np.array([3, 4])})[0] == 12


def test_heap_values_are_owned_by_one_array_of_slots(tmp_path):
    """Values of a run-time size are owned by the function's array of heap slots, named by an
    enum and cleared by a function the compiler does not see into (as separate locals, GCC
    carried each through every early exit: GPT-2's graph took it minutes). Names that look
    like a slot's stay distinct from it."""
    long = "a_tensor_name_longer_than_the_forty_characters_an_identifier_keeps"
    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="double"),
             helper.make_node("Relu", ["a"], ["a_mem"], name="relu"),
             helper.make_node("Neg", ["a_mem"], ["t_a_mem"], name="negate"),
             helper.make_node("Abs", ["t_a_mem"], [long], name="abs"),
             helper.make_node("Add", ["a", long], ["y"], name="sum")]
    m = make_model(nodes, [("x", T.FLOAT, ["n", 3])], [("y", T.FLOAT, ["n", 3])])
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(optimization_level=1))
    source = (tmp_path / "model.c").read_text()
    start = source.index("static int run_graph(")
    graph = source[start:source.index("\n}\n", start)]
    assert "void *heap[heap_count];" in graph and "onnxc_slots_clear(heap, heap_count);" in graph
    assert not re.search(r"void \*\w+_mem\b", graph)   # no slot is a local variable
    slots = re.findall(r"^        (\w+),$", graph[graph.index("enum {"):graph.index("heap_count")], re.M)
    assert len(slots) == 4 and len(set(slots)) == 4   # a, a_mem, t_a_mem, the long one: one slot each
    for slot in slots:   # each named after its value's variable, which it owns
        var = re.search(rf"float \*(\w+) = \(float \*\)heap\[{slot}\];", graph).group(1)
        assert slot.startswith(var + "_mem")
    x = np.array([[1, -2, 3], [0.5, 0, -1]], np.float32)
    y, = onnxc.InferenceSession(str(tmp_path)).run(None, {"x": x})
    np.testing.assert_array_equal(y, 2 * x + np.abs(-np.maximum(2 * x, 0)))


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


def test_a_graph_of_many_nodes_gets_a_unit_of_its_own_and_counts_as_a_load():
    """units.split_units: few node functions stay with the graph below GRAPH_UNIT_NODES nodes;
    from there the graph unit is apart (even on one core), and the node functions are shared
    out with the graph unit's compile as a load on the first core."""
    from onnxc.codegen import units

    def fn(k, size, family="f"):
        return {"kind": "node", "name": f"n{k}", "family": family, "body": "x" * size}
    few = [fn(k, 100) for k in range(20)]
    assert units.split_units(few, 2, graph_nodes=units.GRAPH_UNIT_NODES - 1) == []
    for jobs in (1, 2, 4):
        parts = units.split_units(few, jobs, graph_nodes=units.GRAPH_UNIT_NODES)
        assert [[f["name"] for f in part] for part in parts] == [[f["name"] for f in few]]
    # node code worth two cores: the unit built after the graph unit is the smaller one
    many = [fn(k, 4000, family=f"f{k % 7}") for k in range(40)]
    graph_nodes = 20 * 4000 // units.GRAPH_NODE_BYTES
    parts = units.split_units(many, 2, graph_nodes=graph_nodes)
    sizes = [sum(len(f["body"]) for f in part) for part in parts]
    assert len(parts) == 2 and sizes[0] < sizes[1] and sum(sizes) == 40 * 4000
    assert abs(sizes[0] + graph_nodes * units.GRAPH_NODE_BYTES - sizes[1]) <= 2 * 4000 * 6
    assert sorted(f["name"] for part in parts for f in part) == sorted(f["name"] for f in many)
    assert units.split_units(many, 2) == units.split_units(many, 2, graph_nodes=units.GRAPH_UNIT_NODES - 1)


def test_a_model_of_many_nodes_builds_its_graph_unit_apart_on_one_core(monkeypatch, tmp_path):
    """One core, node functions too small to split, but nodes enough: model.c (the graph unit,
    at GRAPH_OPT) and one node unit, which compute what onnxruntime does."""
    from helpers import run_ort

    from onnxc import driver
    from onnxc.codegen import units
    monkeypatch.setattr(units, "GRAPH_UNIT_NODES", 3)
    monkeypatch.setattr(driver, "usable_cores", lambda: 1)
    model = _split_model()
    driver.compile_model(model, tmp_path)
    assert {p.name for p in tmp_path.iterdir() if p.name.startswith("model")} == {
        "model.c", "model.h", "model_common.h", "model_nodes_1.c"}
    feeds = {"x": np.array([[1, -2, 3], [0.5, 0, -1]], np.float32), "n": np.array(3, np.int64)}
    actual = onnxc.InferenceSession(str(tmp_path)).run(None, feeds)
    expected = run_ort(model, feeds)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5)
    assert actual[1].tolist() == expected[1].tolist()


def test_the_graph_unit_of_a_split_build_is_compiled_without_optimization(monkeypatch, tmp_path):
    """model.c of a split build holds the graph's functions only (calls in order, checks,
    releases): it is built with GRAPH_OPT, the node units with the build's optimization."""
    from onnxc import driver
    from onnxc.codegen import toolchain, units
    commands = []
    run_units = toolchain._run_units

    def recording(cmds, *args, **kwargs):
        commands.extend(cmd for cmd, _ in cmds)
        return run_units(cmds, *args, **kwargs)
    monkeypatch.setattr(toolchain, "_run_units", recording)
    monkeypatch.setattr(units, "UNIT_BYTES", 1)
    monkeypatch.setattr(driver, "usable_cores", lambda: 3)
    driver.compile_model(_split_model(), tmp_path)
    flags = {os.path.basename(cmd[cmd.index("-c") + 1]): cmd for cmd in commands if "-c" in cmd}
    assert set(flags) >= {"model.c", "model_nodes_1.c", "model_nodes_2.c"}
    assert toolchain.GRAPH_OPT[0] in flags["model.c"] and "-O2" not in flags["model.c"]
    assert all("-O2" in cmd and toolchain.GRAPH_OPT[0] not in cmd for name, cmd in flags.items()
               if name.startswith("model_nodes_"))
    assert f"graph={' '.join(toolchain.Toolchain().graph_flags())}" in toolchain.Toolchain().identity()
    # the link: helper objects (the GEMM's) before the model's units, at the same place in every model
    [link] = [cmd for cmd in commands if "-c" not in cmd]
    objects = [arg for arg in link if arg.endswith(".o")]
    own = [".objects-" in arg for arg in objects]   # (the units' objects, in the build's temporary folder)
    assert own == sorted(own) and not own[0] and own[-1], link


def test_names_record_a_use_when_written_not_when_handled():
    """A node function's parameters are what its text names: a name or dim handed around,
    combined into expressions, compared or hashed is no use; written by a template (or formatted
    by a lowering) it is, and an expression built from it carries it until then."""
    import jinja2

    from onnxc.codegen.uses import Reads, Uses
    uses = Uses()
    x, w, n = uses.tensor("X"), uses.tensor("W"), uses.dim("dim_n")
    size, load = cexpr.mul(4, n), x + "[i]"
    assert size == "(4 * dim_n)" and load == "X[i]" and {x: 0}["X"] == 0 and w != x
    assert uses.lowered == Reads()
    with uses.into(Reads()) as body:
        text = jinja2.Environment().from_string("{{ y }} = {{ load }} * {{ size }};").render(
            y="Y", load=load, size=size, unused=w)
    assert text == "Y = X[i] * (4 * dim_n);" and body == Reads({"X"}, {"dim_n"})
    assert f"{w}[0]" == "W[0]" and uses.lowered == Reads({"W"}, set())   # a lowering's f-string


def _node_functions(source: str) -> dict[str, str]:
    """Node function name -> its parameter list, from the generated source."""
    import re
    return dict(re.findall(r"static int (node\w+)\((.*)\)\n", source))


def test_a_node_function_takes_what_its_body_writes(tmp_path):
    """QuantizeLinear to float8 has a zero point, which the conversion never reads: its function
    does not take it. A ReduceSum over run-time axes computes its output dims from the axes
    alone (the shape function takes the axes, no data, no dims) and then reduces the data."""
    zp = helper.make_tensor("zp", T.FLOAT8E4M3FN, [], [0.0])
    axes = helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)
    m = make_model([helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"]), axes],
                   [("x", T.FLOAT, [2, 3]), ("scale", T.FLOAT, []), ("axes", T.INT64, [1])],
                   [("q", T.FLOAT8E4M3FN, [2, 3]), ("s", T.FLOAT, ["k"])], [zp])
    onnxc.compile_model(m, tmp_path)
    functions = _node_functions((tmp_path / "model.c").read_text())
    assert functions["node0_QuantizeLinear_QuantizeLinear"] == \
        "onnxc_ctx *ctx, const float *restrict x, const float *restrict y_scale, uint8_t *restrict y"
    shape = functions["node1_ReduceSum_ReduceSum_shape"]
    assert shape.startswith("onnxc_ctx *ctx, const int64_t *restrict axes, int64_t *restrict out_dim_")
    assert "data" not in shape and "int64_t dim_" not in shape
    assert "int64_t dim_" in functions["node1_ReduceSum_ReduceSum"]


def test_codegen_reads_no_generated_code():
    """Nothing in codegen/ searches the code it rendered: a node function's parameters are what
    its text recorded (codegen/uses.py), a size's dims and value are the data it was built from
    (codegen/cexpr.py). The regular expressions left work on model names (C identifiers and
    macro names made from them) and on the package prefix; a new one is reviewed here."""
    import ast
    import pathlib

    import onnxc.codegen as codegen
    allowed = {("names.py", "Mangler.__call__"),          # a model name -> a C identifier
               ("embedded.py", "<module>"),                # the --name prefix is a C identifier
               ("c_emitter.py", "CEmitter._emit_embedded")}  # a bounded dim's name -> a macro name
    found = set()

    def visit(node: ast.AST, scope: tuple[str, ...], module: str) -> None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
            found.add((module, ".".join(scope) or "<module>"))
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            scope = (*scope, node.name)
        for child in ast.iter_child_nodes(node):
            visit(child, scope, module)
    for path in sorted(pathlib.Path(codegen.__file__).parent.glob("*.py")):
        visit(ast.parse(path.read_text()), (), path.name)
    assert found == allowed


def test_a_scratch_size_of_bounded_dims_is_planned_in_the_arena():
    """A package whose spatial dims are bounded: the Conv's im2col buffer, sized at run time by
    a band of rows (onnxc_dim_max of a quotient of the dims), gets the arena room of its largest
    size (a run-time check against it) instead of an allocation, which a package refuses."""
    from onnxc.driver import CompileOptions, generate_source
    w = onnx.numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "W")
    model = make_model([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
                       [("x", T.FLOAT, [1, 2, "h", "w"])], [("y", T.FLOAT, [1, 4, "h", "w"])], [w])
    package = generate_source(model, CompileOptions(target="c", march="", dim_bounds=(("h", 8), ("w", 8))))
    assert "onnxc_dim_max(1, " in package.source and "malloc" not in package.source
    assert re.search(r"scratch_col = \(uint8_t \*\)\(void \*\)\(ctx->arena \+ ARENA_PLANNED \+ \d+\);", package.source)


def test_a_cuda_shell_takes_only_the_scratch_it_uses():
    """A float32 MatMul of two run-time operands: the C build packs them in scratch, the CUDA
    kernel stages tiles in shared memory. The CUDA function takes no scratch and its device
    arena has no room for the C loops' buffers."""
    from onnxc.driver import CompileOptions, generate_source
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [("a", T.FLOAT, [64, 64]), ("b", T.FLOAT, [64, 64])], [("y", T.FLOAT, [64, 64])])
    native = generate_source(model, CompileOptions())
    cuda = generate_source(model, CompileOptions(target="cuda"))
    assert "scratch_pack" in native.source and "scratch_" not in cuda.source
    assert cuda.arena_bytes < native.arena_bytes


def _scratch_models() -> list:
    """Nodes whose CUDA shells drop some of the C build's scratch in some variants and keep it in
    others: Det's thread-, block-per-matrix and one-block variants, TopK's thread- and
    block-per-row ones, the GEMM tiles of MatMul, Gemm and Conv."""
    rng = np.random.default_rng(0)
    models = [make_model([helper.make_node("Det", ["x"], ["y"])], [("x", T.FLOAT, [2, n, n])], [("y", T.FLOAT, [2])])
              for n in (3, 20, 100)]
    for n in (10, 200):
        k = onnx.numpy_helper.from_array(np.array([3], np.int64), "k")
        models.append(make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", T.FLOAT, [4, n])],
                                 [("v", T.FLOAT, [4, 3]), ("i", T.INT64, [4, 3])], [k]))
    models.append(make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                             [("a", T.FLOAT, ["m", 64]), ("b", T.FLOAT, [64, 32])], [("y", T.FLOAT, ["m", 32])]))
    models.append(make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
                             [("a", T.FLOAT, [8, 16]), ("b", T.FLOAT, [4, 16])], [("y", T.FLOAT, [8, 4])]))
    w = onnx.numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    models.append(make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                             [("x", T.FLOAT, [1, 3, 8, 8])], [("y", T.FLOAT, [1, 4, 8, 8])], [w]))
    return models


def test_a_cuda_shell_drops_no_scratch_its_variant_uses():
    """Each node function of the CUDA build takes every scratch buffer its body names: a shell
    function that drops scratch the variant it picks still uses fails here (nvcc would reject
    the source), without a CUDA toolchain."""
    from onnxc.driver import CompileOptions, generate_source
    function = re.compile(r"ONNXC_NODE static int (\w+)\(([^)]*)\)\n\{\n(.*?)\n\}\n", re.S)
    checked = 0
    for model in _scratch_models():
        source = generate_source(model, CompileOptions(target="cuda")).source
        for name, params, body in function.findall(source):
            named = set(re.findall(r"\bscratch_\w+", body))
            assert named <= set(re.findall(r"\bscratch_\w+", params)), (name, named)
            checked += bool(named)
    assert checked   # (the one-block Det reads its scratch)


def test_every_cuda_shell_decides_in_python():
    """What a CUDA shell decides (its launch, its variant, the C build's scratch it does without)
    is a registered function of codegen/cuda_shells/, one per shell template and none without
    one; no template sets a launch or drops scratch itself."""
    from onnxc.codegen import cuda_shells
    folder = resources.files("onnxc.templates") / "cuda"
    shells = {path.name[:-len(".cu.j2")] for path in folder.iterdir()
              if path.name.endswith(".cu.j2") and path.name != "model.cu.j2"}
    assert shells == set(cuda_shells.SHELLS)
    import pathlib
    python = "".join(path.read_text() for path in pathlib.Path(cuda_shells.__file__).parent.glob("*.py"))
    for path in folder.iterdir():
        if path.name.endswith(".j2"):
            text = path.read_text()
            assert not re.search(r"\{%-?\s*set\s+launch\b", text), path.name
            assert "discard_scratch" not in text, path.name
            for variant in re.findall(r'shell\.variant == "(\w+)"', text):   # (a misspelt one would never render)
                assert f'"{variant}"' in python, (path.name, variant)


def test_no_shared_kernel_macro_hides_a_name_its_bodies_read():
    """A macro of templates/kernels/ named like a field of the kernel's data hides that field
    from every body of the file (Jinja resolves the name to the macro): ScatterND's `checks`
    macro once iterated itself wherever a shape was checked at run time."""
    import pathlib
    root = pathlib.Path(str(resources.files("onnxc.templates"))) / "kernels"
    clashes = []
    for path in sorted(root.glob("*.j2")):
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)
        macros = set(re.findall(r"\{%-?\s*macro\s+(\w+)\(", text))
        for tag in re.findall(r"\{\{.*?\}\}|\{%.*?%\}", text, flags=re.S):
            if re.match(r"\{%-?\s*macro\b", tag):
                continue
            code = re.sub(r'"[^"]*"|\'[^\']*\'', '""', tag)   # (words inside string literals are C text)
            clashes += [(path.name, m) for m in macros if re.search(rf"(?<![\w.]){m}\b(?!\s*\()", code)]
    assert not clashes, clashes


def _run_time_checked(op: str) -> tuple[onnx.ModelProto, dict]:
    x = np.arange(24, dtype=np.float32)
    if op == "ScatterND":
        return (make_model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"])],
                           [("d", T.FLOAT, ["N", 4]), ("i", T.INT64, ["K", 1]), ("u", T.FLOAT, ["K", 4])],
                           [("y", T.FLOAT, ["N", 4])]),
                {"d": x[:20].reshape(5, 4), "i": np.array([[1], [3]]), "u": np.full((2, 4), 7, np.float32)})
    if op == "ScatterElements":
        return (make_model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0)],
                           [("d", T.FLOAT, ["N", 4]), ("i", T.INT64, ["K", "M"]), ("u", T.FLOAT, ["K", "M"])],
                           [("y", T.FLOAT, ["N", 4])]),
                {"d": x[:20].reshape(5, 4), "i": np.array([[1, 2], [3, 0]]), "u": np.full((2, 2), 7, np.float32)})
    if op == "ReverseSequence":
        return (make_model([helper.make_node("ReverseSequence", ["d", "l"], ["y"], batch_axis=1, time_axis=0)],
                           [("d", T.FLOAT, ["T", "B", 3]), ("l", T.INT64, ["L"])], [("y", T.FLOAT, ["T", "B", 3])]),
                {"d": x.reshape(4, 2, 3), "l": np.array([2, 4])})
    return (make_model([helper.make_node("MaxUnpool", ["d", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                       [("d", T.FLOAT, ["N", 1, 2, 2]), ("i", T.INT64, ["M", 1, 2, 2])], [("y", T.FLOAT, ["A", "B", "C", "D"])]),
            {"d": x[:4].reshape(1, 1, 2, 2), "i": np.array([[[[0, 3], [9, 14]]]])})


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements", "ReverseSequence", "MaxUnpool"])
def test_shared_bodies_with_checks_at_run_time(op):
    """The families whose shared bodies include the shape checks a lowering asks for at run time
    (dims known only then), compared with onnxruntime."""
    from tools import require_module
    ort = require_module("onnxruntime")
    model, feed = _run_time_checked(op)
    data = model.SerializeToString()
    got = onnxc.InferenceSession(data).run(None, feed)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_loop_whose_trip_count_a_check_fixed_compiles(tmp_path):
    """GCC's -Waggressive-loop-optimizations fires on the remainder loop of a LayerNormalization
    over a symbolic axis that its Scale's check fixes (Swin-T's export): a warning about an
    iteration that never runs must not fail the build (warnings are errors in generated code)."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(768).astype(np.float32), "bias")]
    m = make_model([helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)],
                   [("x", T.FLOAT, ["n", "s", "c"])], [("y", T.FLOAT, ["n", "s", "c"])], inits, opset=17)
    onnxc.compile_model(m, tmp_path, onnxc.CompileOptions(threads=1))
    x = rng.standard_normal((2, 3, 768)).astype(np.float32)
    got = onnxc.InferenceSession(str(tmp_path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, run_ort(m, {"x": x})[0], rtol=1e-4, atol=1e-4)
