"""The ``onnxc`` command line: compile, run, verify, bench, info, ops, help texts and exit codes."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from helpers import make_model
from tools import requires
from onnx import TensorProto, helper, numpy_helper

import onnxc
from onnxc import cli
from onnxc._cli_data import compare, safe_file_name, save_outputs
from onnxc._progress import CompileProgress

needs_ort = requires(importlib.util.find_spec("onnxruntime") is not None, "needs onnxruntime (the test extra)")
ODD_NAME = "w/1:out"  # an output name that is no file name


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Small models written to a folder: a float one with a symbolic dim, a sequence one, a
    string one and one with an operator nobody implements."""
    d = tmp_path_factory.mktemp("cli-models")
    paths = {}
    add = make_model([helper.make_node("Add", ["x", "y"], ["z"]), helper.make_node("Tanh", ["z"], [ODD_NAME])],
                     [("x", TensorProto.FLOAT, ["batch", 3]), ("y", TensorProto.FLOAT, [1, 3])],
                     [("z", TensorProto.FLOAT, ["batch", 3]), (ODD_NAME, TensorProto.FLOAT, ["batch", 3])])
    seq_in = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3]))
    seq_out = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3]))
    seq = helper.make_model(helper.make_graph(
        [helper.make_node("SequenceLength", ["q"], ["n"]), helper.make_node("ConcatFromSequence", ["q"], ["c"], axis=0),
         helper.make_node("SequenceInsert", ["q", "t"], ["r"])], "seq",
        [helper.make_value_info("q", seq_in), helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, ["k", 3]), helper.make_value_info("r", seq_out)]),
        opset_imports=[helper.make_opsetid("", 18)])
    seq.ir_version = 9
    strings = make_model([helper.make_node("Identity", ["s"], ["u"]), helper.make_node("Shape", ["s"], ["shape"])],
                         [("s", TensorProto.STRING, [3])], [("u", TensorProto.STRING, [3]), ("shape", TensorProto.INT64, [1])])
    unsupported = make_model([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")],
                             [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])],
                             extra_opsets={"com.example": 1})
    for name, model in (("add", add), ("seq", seq), ("strings", strings), ("unsupported", unsupported)):
        paths[name] = str(d / f"{name}.onnx")
        onnx.save(model, paths[name])
    return paths


@pytest.fixture(scope="module")
def artifact(models, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("cli-artifact") / "add")
    onnxc.compile_model(models["add"], folder)
    return folder


def _main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- help and exit codes ------------------------------------------------------------------------------

def test_top_level_help_documents_commands_and_exit_codes(capsys):
    code, out, _ = _main(capsys, "--help")
    assert code == 0
    for word in ("compile", "run", "verify", "bench", "info", "ops", "exit status"):
        assert word in out
    for status in ("0  success", "1  error", "2  the model uses operators", "3  the reference runtime"):
        assert status in out


@pytest.mark.parametrize("command", ["compile", "run", "verify", "bench", "info", "cache", "ops", "completion"])
def test_every_command_has_help_with_examples(capsys, command):
    code, out, _ = _main(capsys, command, "--help")
    assert code == 0
    assert f"usage: onnxc {command}" in out and "examples:" in out and f"onnxc {command}" in out.split("examples:")[1]


def test_usage_errors_exit_1(capsys):
    code, _, err = _main(capsys, "frobnicate")
    assert code == 1 and "invalid choice" in err
    code, _, err = _main(capsys, "run")
    assert code == 1 and "required" in err
    code, _, err = _main(capsys, "compile", "m.onnx", "-O", "5")
    assert code == 1 and "invalid choice" in err


def test_python_m_onnxc_exit_status(models):
    proc = subprocess.run([sys.executable, "-m", "onnxc", "info", models["unsupported"]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "com.example::Frobnicate" in proc.stdout and "NOT SUPPORTED" in proc.stdout


# --- compile ------------------------------------------------------------------------------------------

def test_compile_quiet_prints_nothing(capsys, models, tmp_path):
    out_dir = tmp_path / "art"
    code, out, err = _main(capsys, "compile", models["add"], "-o", out_dir, "--quiet")
    assert code == 0 and out == "" and err == ""
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert [i["name"] for i in manifest["inputs"]] == ["x", "y"]
    assert (out_dir / "libmodel.so").is_file() and (out_dir / "model.c").is_file()


def test_compile_summary_and_stages(capsys, models, tmp_path):
    code, out, err = _main(capsys, "compile", models["add"], "-o", tmp_path / "art", "--progress", "-O", "1")
    assert code == 0
    assert out.startswith(f"compiled {models['add']} -> ") and "node functions" in out
    # one line per stage as it ends, then their durations
    lines = err.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["load/check", "passes", "codegen", "C", "link"]
    assert lines[3].startswith("C compile ") and lines[3].endswith("(1 unit)")
    assert lines[-1].startswith("stages: load/check ") and "C compile" in lines[-1]
    # compiled again: the cache has it, and nothing is shown
    code, out, err = _main(capsys, "compile", models["add"], "-o", tmp_path / "again", "--progress", "-O", "1")
    assert code == 0 and out.startswith(f"found in the cache {models['add']} -> ") and err == ""
    assert (tmp_path / "again" / "libmodel.so").read_bytes() == (tmp_path / "art" / "libmodel.so").read_bytes()


def test_commands_share_one_cache(capsys, models, tmp_path, monkeypatch):
    """`onnxc compile -o` builds through the cache, so `verify` and `run` of the same model
    after it compile nothing; `cache list`, `info` and `clear` show and prune it."""
    from onnxc import driver
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(tmp_path / "cache"))
    builds = []
    real = driver.compile_model
    monkeypatch.setattr(driver, "compile_model", lambda *a, **k: builds.append(a) or real(*a, **k))
    code, out, err = _main(capsys, "compile", models["add"], "-o", tmp_path / "art", "--threads", "0")
    assert code == 0 and out.startswith("compiled") and len(builds) == 1, err
    code, out, err = _main(capsys, "verify", models["add"])
    assert code == 0 and "PASS" in out and len(builds) == 1, err
    code, out, err = _main(capsys, "run", models["add"])
    assert code == 0 and len(builds) == 1, err
    code, out, _ = _main(capsys, "cache", "list")
    assert code == 0 and "1 artifact(s)" in out and os.path.basename(models["add"]) in out
    key = out.splitlines()[2].split()[0]
    code, out, _ = _main(capsys, "cache", "info", key[:8])
    assert code == 0 and "intra-op threads: " in out and "graph: 'test'" in out
    code, out, _ = _main(capsys, "cache", "clear", "--older-than", "1")
    assert code == 0 and out.startswith("removed 0 artifact(s)")
    code, out, _ = _main(capsys, "cache", "clear")
    assert code == 0 and out.startswith("removed 1 artifact(s)") and not (tmp_path / "cache" / key).exists()


def test_compile_of_a_model_compiled_per_input_signature(capsys, tmp_path):
    """A model whose ranks are known only at run time (an If whose branches differ, as silero
    VAD's decoder) is written for a session to compile per input signature: the command says so
    rather than failing on the library it does not have yet, and the artifact runs."""
    from test_dynamic_rank import squeeze_without_axes
    path = tmp_path / "squeeze.onnx"
    onnx.save(squeeze_without_axes(), path)
    code, out, err = _main(capsys, "compile", path, "-o", tmp_path / "art")
    assert code == 0, err
    assert out.startswith(f"wrote {path} -> ") and "compiled per input signature when it runs:" in out
    sess = onnxc.InferenceSession(str(tmp_path / "art"))
    assert sess.run(None, {"x": np.ones((1, 3, 1), np.float32)})[0].shape == (3,)


def test_compile_errors(capsys, models, tmp_path):
    code, out, err = _main(capsys, "compile", tmp_path / "missing.onnx", "-o", tmp_path / "a", "--quiet")
    assert code == 1 and "model file not found" in err and out == ""
    code, out, err = _main(capsys, "compile", models["unsupported"], "-o", tmp_path / "b")
    assert code == 2 and "Frobnicate" in err


def test_compile_disables_an_optimization(capsys, tmp_path):
    """--disable drops a pass or lowering choice by name: a 3x3 convolution Winograd would
    take is compiled by im2col, and a name onnxc does not have is refused."""
    w = np.random.default_rng(0).standard_normal((32, 32, 3, 3)).astype(np.float32)
    conv = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                      [("x", TensorProto.FLOAT, [1, 32, 28, 28])], [("y", TensorProto.FLOAT, [1, 32, 28, 28])],
                      initializers=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    path = str(tmp_path / "conv.onnx")
    onnx.save(conv, path)
    sources = {}
    for name, extra in (("default", ()), ("im2col", ("--disable", "conv_winograd", "--disable", "fold_constants"))):
        code, _, err = _main(capsys, "compile", path, "-o", tmp_path / name, "--quiet", *extra)
        assert code == 0, err
        sources[name] = (tmp_path / name / "model.c").read_text(encoding="utf-8")
    assert "Winograd's F(" in sources["default"] and "Winograd" not in sources["im2col"]
    code, _, err = _main(capsys, "compile", path, "-o", tmp_path / "bad", "--disable", "no_such_pass")
    assert code == 1 and "no_such_pass" in err and "conv_winograd" in err


def test_live_display_is_a_progress_bar_over_the_units():
    """On a terminal the stage in progress and the units built are one bar (tqdm), redrawn in
    place; the stage times are kept for the summary."""
    pytest.importorskip("tqdm")   # (pinned in the test extra; without it the display is plain lines)
    stream = io.StringIO()
    progress = CompileProgress(stream, live=True)
    progress("load/check", {"seconds": 0.5, "nodes": 3})
    progress("pass", {"seconds": 0.1, "name": "infer_shapes"})
    assert "passes (after infer_shapes)" in stream.getvalue()
    progress("codegen", {"seconds": 0.2, "units": 3})
    progress("compile", {"seconds": 1.0, "unit": "model_nodes_1.c", "done": 1, "total": 3})
    assert "C compile" in stream.getvalue().rsplit("\r", 1)[-1] and "1/3 units" in stream.getvalue()
    progress("compile", {"seconds": 1.0, "unit": "model_nodes_2.c", "done": 2, "total": 3})
    progress("compile", {"seconds": 1.0, "unit": "model.c", "done": 3, "total": 3})
    progress("link", {"seconds": 0.1})
    progress.close()
    assert "\r" in stream.getvalue() and "\n" not in stream.getvalue().rstrip("\n")   # redrawn, not appended
    assert list(progress.seconds) == ["load/check", "passes", "codegen", "C compile", "link"]
    assert progress.summary().startswith("stages: load/check 0.50s, passes 0.10s, codegen 0.20s, C compile ")


# --- run -------------------------------------------------------------------------------------------------

def test_run_npy_and_pb_inputs_to_output_dir(capsys, artifact, tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    y = np.array([[0.5, -1.0, 2.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "y.pb").write_bytes(numpy_helper.from_array(y, name="y").SerializeToString())
    out_dir = tmp_path / "out"
    code, out, err = _main(capsys, "run", artifact, "-i", f"x={tmp_path / 'x.npy'}", "-i", tmp_path / "y.pb",
                           "--output-dir", out_dir)
    assert code == 0, err
    assert "input x: float[2, 3] from" in out and "input y: float[1, 3] from" in out
    assert "output z: tensor(float) float[2, 3] min" in out
    assert sorted(os.listdir(out_dir)) == ["w_1_out.npy", "z.npy"]
    np.testing.assert_allclose(np.load(out_dir / "z.npy"), x + y, rtol=1e-6)
    np.testing.assert_allclose(np.load(out_dir / "w_1_out.npy"), np.tanh(x + y), rtol=1e-5)


def test_run_npz_inputs(capsys, models, tmp_path):
    x = np.full((4, 3), 0.25, np.float32)
    y = np.ones((1, 3), np.float32)
    np.savez(tmp_path / "feeds.npz", x=x, y=y)
    code, out, err = _main(capsys, "run", models["add"], "--input", tmp_path / "feeds.npz", "--output-dir",
                           tmp_path / "out")
    assert code == 0, err
    assert "from" in out and "feeds.npz[x]" in out and "feeds.npz[y]" in out
    np.testing.assert_allclose(np.load(tmp_path / "out" / "z.npy"), x + y)


def test_run_random_inputs_and_dims(capsys, models):
    code, out, err = _main(capsys, "run", models["add"], "--dim", "batch=5", "--seed", "3")
    assert code == 0, err
    assert "input x: float[5, 3] random" in out and "output z: tensor(float) float[5, 3]" in out
    code, out, _ = _main(capsys, "run", models["add"])
    assert "input x: float[1, 3] random (dims batch default to 1; set with --dim)" in out


def test_run_errors(capsys, models, tmp_path):
    np.save(tmp_path / "x64.npy", np.ones((2, 3)))
    cases = [
        (["-i", f"nope={tmp_path / 'x64.npy'}"], "has no input 'nope'"),
        (["-i", f"x={tmp_path / 'missing.npy'}"], "file not found"),
        (["-i", f"x={tmp_path / 'x64.npy'}"], "Unexpected input data type"),
        (["-i", f"x={models['add']}"], "expected a .npy, .npz or .pb file"),
        (["-i", tmp_path / "x64.npy"], "give NAME="),
        (["--dim", "batch"], "expected NAME=SIZE"),
    ]
    for extra, message in cases:
        code, _, err = _main(capsys, "run", models["add"], *extra)
        assert code == 1 and message in err, (extra, err)
        assert err.startswith("onnxc: error: ") and "Traceback" not in err
    code, _, err = _main(capsys, "run", tmp_path / "missing.onnx")
    assert code == 1 and "model not found" in err


def test_run_sequence_input_from_pb(capsys, models, tmp_path):
    items = [np.full((2, 3), i, np.float32) for i in range(3)]
    (tmp_path / "q.pb").write_bytes(numpy_helper.from_list(items, name="q").SerializeToString())
    code, out, err = _main(capsys, "run", models["seq"], "-i", f"q={tmp_path / 'q.pb'}", "--output-dir",
                           tmp_path / "out")
    assert code == 0, err
    assert "input q: seq(3 x float[2, 3]) from" in out and "output n: tensor(int64) int64[] min 3" in out
    saved = np.load(tmp_path / "out" / "r.npz")
    assert sorted(saved.files, key=int) == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(saved["1"], items[1])
    # not given: two random tensors
    code, out, _ = _main(capsys, "run", models["seq"])
    assert code == 0 and "input q: seq(2 x float[2, 3]) random" in out


def test_run_strings(capsys, models, tmp_path):
    np.save(tmp_path / "s.npy", np.array(["a", "Bc", "ü"]))
    code, out, err = _main(capsys, "run", models["strings"], "-i", f"s={tmp_path / 's.npy'}", "--output-dir",
                           tmp_path / "out")
    assert code == 0, err
    assert "output u: tensor(string) string[3] values 'a', 'Bc', 'ü'" in out
    assert np.load(tmp_path / "out" / "u.npy", allow_pickle=False).tolist() == ["a", "Bc", "ü"]


def test_output_file_names_are_sanitized(tmp_path):
    taken: set[str] = set()
    names = [safe_file_name(n, taken) for n in ("../evil", ".hidden", "a/b", "A", "a", "", "x" * 300)]
    assert names[:6] == ["_evil", "hidden", "a_b", "A", "a_2", "output"] and len(names[6]) == 100
    assert all("/" not in n and not n.startswith(".") for n in names)
    lines = save_outputs(str(tmp_path), ["../up", "bf"], [np.ones(2, np.float32),
                                                          np.ones(2, dtype=ml_dtypes.bfloat16)])
    assert sorted(os.listdir(tmp_path)) == ["_up.npy", "bf.npy"] and "saved as float32" in lines[1]
    assert np.load(tmp_path / "bf.npy").dtype == np.float32


# --- verify ---------------------------------------------------------------------------------------------

@needs_ort
def test_verify_pass(capsys, models):
    code, out, err = _main(capsys, "verify", models["add"], "--dim", "batch=3")
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("z ", "w/1"))}
    assert rows["z"][1] == "float[3," and rows["z"][-1] == "PASS" and rows[ODD_NAME][-1] == "PASS"
    assert "max abs err" in out and out.strip().endswith("match onnxruntime (rtol=0.0001, atol=1e-05)")


@needs_ort
def test_verify_fails_when_onnxc_is_off(capsys, models, monkeypatch):
    """The same model passes above; outputs nudged by 1e-3 must fail the default tolerances
    and pass looser ones."""
    from onnxc.runtime.session import InferenceSession
    real = InferenceSession.run

    def nudged(self, *args, **kwargs):
        return [o + np.float32(1e-3) for o in real(self, *args, **kwargs)]
    monkeypatch.setattr(InferenceSession, "run", nudged)
    code, out, _ = _main(capsys, "verify", models["add"])
    assert code == 1
    assert out.count("FAIL") == 3 and "out of tolerance" in out   # two rows and the verdict
    z_row = next(line for line in out.splitlines() if line.startswith("z "))
    assert abs(float(z_row.split()[3]) - 1e-3) < 1e-4             # the max abs error is the nudge
    code, out, _ = _main(capsys, "verify", models["add"], "--rtol", "0", "--atol", "2e-3")
    assert code == 0 and "PASS: 2 output(s)" in out


@needs_ort
def test_verify_dtype_and_shape_mismatch(capsys, models, monkeypatch):
    from onnxc.runtime.session import InferenceSession
    real = InferenceSession.run
    def changed(self, *args, **kwargs):
        z, w = real(self, *args, **kwargs)
        return [z.astype(np.float64), w[:, :2]]
    monkeypatch.setattr(InferenceSession, "run", changed)
    code, out, _ = _main(capsys, "verify", models["add"])
    assert code == 1 and "dtype double vs reference float" in out and "shape [1, 2] vs reference [1, 3]" in out


@needs_ort
def test_verify_sequences_and_strings(capsys, models):
    code, out, err = _main(capsys, "verify", models["seq"])
    assert code == 0, err
    assert [line.split()[-1] for line in out.splitlines() if line.startswith(("n ", "c ", "r "))] == ["PASS"] * 3
    code, out, err = _main(capsys, "verify", models["strings"])
    assert code == 0, err
    assert "u  " in out and "PASS: 2 output(s)" in out


@needs_ort
def test_verify_with_artifact_and_errors(capsys, models, artifact):
    code, out, err = _main(capsys, "verify", models["add"], "--artifact", artifact)
    assert code == 0, err
    code, _, err = _main(capsys, "verify", artifact)
    assert code == 1 and "verify needs the .onnx model" in err


def test_verify_without_onnxruntime_exits_3(capsys, models, monkeypatch):
    monkeypatch.setattr(cli, "_reference_runtime", lambda: None)
    code, out, err = _main(capsys, "verify", models["add"])
    assert code == 3 and "onnxruntime is not installed" in err and out == ""
    code, out, _ = _main(capsys, "bench", models["add"], "--runs", "2")
    assert code == 0 and "onnxruntime is not installed: timing onnxc alone" in out


def test_compare_rules():
    f = np.array([1.0, np.nan, np.inf], np.float32)
    assert compare(f, f.copy(), 0, 0).ok
    assert not compare(f, np.array([1.0, 0.0, np.inf], np.float32), 1, 1).ok      # NaN where a number is
    c = compare(np.array([1.0, 2.0]), np.array([1.0, 2.0001]), 1e-4, 0)
    assert c.ok and abs(c.max_abs - 1e-4) < 1e-9 and abs(c.max_rel - 1e-4 / 2.0001) < 1e-9
    assert not compare(np.array([3]), np.array([4]), 1, 1).ok                       # integers: exactly
    assert not compare(np.array([2**60]), np.array([2**60 + 1]), 1, 1).ok            # ... beyond 2**53 too
    assert not compare(np.array(["a", "b"], object), np.array(["a", "c"], object), 1, 1).ok
    assert "1 of 2 strings differ" in compare(np.array(["a", "b"]), np.array(["a", "c"], object), 0, 0).note
    assert not compare([np.ones(2)], [np.ones(2), np.ones(2)], 1, 1).ok               # sequence lengths
    assert compare([np.ones(2)], [np.ones(2)], 0, 0).ok and compare(None, None, 0, 0).ok
    assert not compare(None, np.ones(1), 1, 1).ok
    assert compare([{"a": 0.5}], [{"a": 0.5}], 0, 0).ok and not compare([{"a": 0.5}], [{"b": 0.5}], 1, 1).ok


# --- bench, info, ops ----------------------------------------------------------------------------------------

@needs_ort
def test_bench(capsys, models):
    code, out, err = _main(capsys, "bench", models["add"], "--runs", "3", "--warmup", "1")
    assert code == 0, err
    assert "3 timed run(s) after 1 warmup run(s)" in out and "intra_op_num_threads=1" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.startswith(("onnxc ", "onnxruntime ", "onnxc/onnxruntime "))}
    assert set(rows) == {"onnxc", "onnxruntime", "onnxc/onnxruntime"}
    lo, median, p90 = map(float, rows["onnxc"])
    assert 0 < lo <= median <= p90
    code, out, _ = _main(capsys, "bench", models["add"], "--runs", "2", "--no-reference")
    assert code == 0 and "onnxruntime" not in out and "onnxc " in out
    code, _, err = _main(capsys, "bench", models["add"], "--runs", "0")
    assert code == 1 and "--runs" in err


def test_info_and_ops(capsys, models, artifact):
    code, out, _ = _main(capsys, "info", models["add"])
    assert code == 0 and "ai.onnx::Add (opset 21): 1 node(s)  ok" in out and "every operator is supported" in out
    code, out, _ = _main(capsys, "info", models["unsupported"])
    assert code == 2 and "1 operator(s) not supported: com.example::Frobnicate" in out
    code, out, _ = _main(capsys, "info", artifact, "--json")
    assert code == 0 and [i["name"] for i in json.loads(out)["inputs"]] == ["x", "y"]
    code, out, _ = _main(capsys, "info", artifact)
    assert code == 0 and "intra-op threads: 1\n" in out and "graph optimization level: 99 (all)" in out
    assert "disabled passes: none" in out and "SIMD target: " in out and "input: 'x' float[batch, 3]" in out
    code, out, _ = _main(capsys, "ops")
    assert code == 0 and "ai.onnx::Add opset " in out


def test_profile_writes_a_trace_and_summarises_it(tmp_path, monkeypatch, capsys):
    from onnx import TensorProto, helper
    from helpers import make_model
    from onnxc.cli import main
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Relu", ["m"], ["y"], name="act")]
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16], [0.01] * 256)
    path = tmp_path / "m.onnx"
    path.write_bytes(make_model(nodes, [("x", TensorProto.FLOAT, ["n", 16])], [("y", TensorProto.FLOAT, ["n", 16])],
                                [w]).SerializeToString())
    monkeypatch.chdir(tmp_path)
    assert main(["profile", str(path), "--runs", "3", "--top", "2", "--dim", "n=4", "-O", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 run(s)" in out and "top 2 node(s)" in out
    assert "mm" in out and "MatMul" in out and "act" in out
    traces = list(tmp_path.glob("onnxc_profile_*.json"))
    assert len(traces) == 1


# --- strictness: dims, broken models, output folders, names, sizes, logging --------------------------------

def test_compile_refuses_a_dim_the_model_does_not_have(capsys, models, tmp_path):
    code, out, err = _main(capsys, "compile", models["add"], "--dim", "bach=4", "-o", tmp_path / "a", "--quiet")
    assert code == 1 and "--dim bach: the model has no input dim of that name (its dims: batch)" in err
    assert not (tmp_path / "a").exists()
    code, _, err = _main(capsys, "compile", models["add"], "--target", "c", "--dim", "bach<=4", "-o", tmp_path / "b")
    assert code == 1 and "its dims: batch" in err
    code, _, err = _main(capsys, "compile", models["add"], "--dim", "batch=4", "-o", tmp_path / "c", "--quiet")
    assert code == 0, err
    assert onnxc.InferenceSession(str(tmp_path / "c")).get_inputs()[0].shape == [4, 3]


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage\xff\xff", "dangling"])
def test_info_fails_on_an_empty_or_broken_model(capsys, tmp_path, content):
    path = tmp_path / "broken.onnx"
    if content == "dangling":   # parses, but a node reads a value nothing defines
        model = make_model([helper.make_node("Relu", ["nothing"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                           [("y", TensorProto.FLOAT, [2])])
        content = model.SerializeToString()
    path.write_bytes(content)
    with pytest.raises(Exception):
        onnx.checker.check_model(onnx.load(str(path)))
    code, out, err = _main(capsys, "info", path)
    assert code == 1 and "every operator is supported" not in out
    assert "not a valid ONNX model" in err or "cannot load" in err


def test_info_still_reports_unknown_operators(capsys, models):
    code, out, _ = _main(capsys, "info", models["unsupported"])
    assert code == 2 and "NOT SUPPORTED" in out
    code, out, _ = _main(capsys, "info", models["add"])
    assert code == 0 and "every operator is supported" in out


def test_compile_refuses_a_folder_holding_another_kind_of_output(capsys, models, tmp_path):
    package = ["--target", "c", "--dim", "batch=1", "--quiet"]
    art = tmp_path / "art"
    assert _main(capsys, "compile", models["add"], "-o", art, "--quiet")[0] == 0
    assert _main(capsys, "compile", models["add"], "-o", art, "--quiet")[0] == 0   # the same kind: rebuilt
    code, _, err = _main(capsys, "compile", models["add"], "-o", art, *package)
    assert code == 1 and "holds an onnxc artifact" in err and "--force" in err
    code, _, err = _main(capsys, "compile", models["add"], "-o", art, *package, "--force")
    assert code == 0, err
    assert (art / "Makefile").is_file() and not (art / "manifest.json").exists() and not (art / "libmodel.so").exists()
    code, _, err = _main(capsys, "compile", models["add"], "-o", art, "--quiet")
    assert code == 1 and "holds a C package" in err
    assert _main(capsys, "compile", models["add"], "-o", art, "--quiet", "--force")[0] == 0
    left = sorted(os.listdir(art))
    assert "manifest.json" in left and not {"Makefile", "CMakeLists.txt", "model_demo.c", "README.md"} & set(left)
    assert _main(capsys, "compile", models["add"], "-o", art, *package, "--force")[0] == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, _, err = _main(capsys, "compile", models["add"], "-o", other, "--quiet")
    assert code == 1 and "files onnxc did not write" in err
    assert _main(capsys, "compile", models["add"], "-o", other, "--quiet", "--force")[0] == 0
    assert (other / "notes.txt").read_text() == "mine" and (other / "manifest.json").is_file()


def test_profile_names_nodes_as_the_model_and_onnxruntime_do(tmp_path, monkeypatch, capsys):
    """Named nodes keep their names; unnamed ones are <Op>_<index> (as onnxruntime's trace) and are
    listed one row each, never merged."""
    import onnxruntime as ort
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["c"]), helper.make_node("Relu", ["c"], ["y"], name="last")]
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, [("x", TensorProto.FLOAT, [4, 64])], [("y", TensorProto.FLOAT, [4, 64])]), str(path))
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, "profile", path, "--runs", "2", "--top", "10", "-O", "0")
    assert code == 0, err
    table = out.split("top ")[1].split("time by operator")[0]
    rows = [line.split() for line in table.splitlines()[2:] if line.strip()]
    names = [r[0] for r in rows]
    assert sorted(names)[:2] == ["Neg_1", "Neg_2"] and {"first", "last"} <= set(names) and len(names) == 4
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((4, 64), np.float32)})
    with open(sess.end_profiling()) as f:
        theirs = {e["name"][:-len("_kernel_time")] for e in json.load(f) if e.get("cat") == "Node"}
    assert {"first", "last", "Neg_1", "Neg_2"} == theirs


def test_sizes_are_printed_for_people(capsys, tmp_path):
    assert [cli.human_size(n) for n in (0, 1023, 1024, 1536, 5 * 2**20, 3 * 2**30)] == \
        ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 GiB"]
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    path = tmp_path / "mm.onnx"
    onnx.save(make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, [64, 256])],
                         [("y", TensorProto.FLOAT, [64, 256])], [w]), str(path))
    code, out, _ = _main(capsys, "compile", path, "--target", "c", "-o", tmp_path / "pkg")
    assert code == 0 and "weights 256.0 KiB" in out and " bytes" not in out


@pytest.fixture
def restore_onnxc_logger():
    import logging
    logger = logging.getLogger("onnxc")
    level, handlers = logger.level, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.handlers[:] = handlers


@pytest.mark.parametrize("flag", [["-v"], ["--log-level", "info"], ["--log-level", "debug"]])
def test_log_level_flag_shows_onnxcs_log_records(capsys, artifact, flag, restore_onnxc_logger):
    code, _, err = _main(capsys, "run", artifact)
    assert code == 0 and "session ready" not in err
    code, _, err = _main(capsys, "run", artifact, *flag)
    assert code == 0 and "INFO: onnxc.session" in err and "session ready" in err
    assert ("DEBUG: onnxc.session" in err) == (flag[-1] == "debug")
