"""CUDA builds made without a GPU: `onnxc compile --target cuda` writes an artifact (model.cu,
the library with nvcc's machine code and PTX, weights, the model it was built from, manifest)
that a session with the CUDA provider loads as built where a GPU runs it, and that falls back
to the CPU, with onnxruntime's warning, where none is.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnxc
from helpers import make_model, run_ort
from onnxc import cli
from onnxc.runtime import cuda
from onnxc.runtime import session as session_module
from test_cuda import needs_nvcc

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def small_model() -> onnx.ModelProto:
    w = (np.random.default_rng(0).standard_normal((6, 4)) * 0.5).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    return make_model(nodes, [("x", TP.FLOAT, ["N", 6])], [("y", TP.FLOAT, ["N", 4])],
                      [numpy_helper.from_array(w, "w")], opset=17)


def feed(n: int = 3) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)}


class Loaded(Exception):
    """What the stub loader raises: the folder the session would have run."""


class NoCompile(AssertionError):
    pass


@pytest.fixture
def no_compile(monkeypatch):
    """A session that compiles anything fails the test."""
    def refuse(*args, **kwargs):
        raise NoCompile("the session compiled instead of loading the artifact")
    monkeypatch.setattr(session_module, "compile_cached", refuse)


@pytest.fixture
def gpu(monkeypatch):
    """This machine as one with a GPU of architecture sm_80 and no nvcc (the library is not
    loaded: the stub loader reports which folder would run)."""
    monkeypatch.delenv(cuda.EMULATE_ENV, raising=False)
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "archs", lambda device=0: ("sm_80",))
    monkeypatch.setattr(cuda, "usable", lambda: False)

    def load(folder, manifest, **kwargs):
        raise Loaded(folder)
    monkeypatch.setattr(session_module, "CompiledModel", load)


def compile_cli(model_path: str, out: str, *extra: str) -> None:
    assert cli.main(["compile", model_path, "--target", "cuda", "-o", out, "--quiet", *extra]) == 0


@pytest.fixture(scope="module")
def nvcc_artifact(tmp_path_factory):
    """`onnxc compile --target cuda --cuda-arch sm_80` on this machine (no GPU): nvcc's build."""
    folder = tmp_path_factory.mktemp("cuda-offline")
    onnx.save(small_model(), str(folder / "model.onnx"))
    before = os.environ.pop(cuda.EMULATE_ENV, None)
    try:
        compile_cli(str(folder / "model.onnx"), str(folder / "art"), "--cuda-arch", "sm_80")
    finally:
        if before is not None:
            os.environ[cuda.EMULATE_ENV] = before
    return str(folder / "art")


@needs_nvcc
def test_the_artifact_holds_nvccs_machine_code_and_ptx(nvcc_artifact):
    files = set(os.listdir(nvcc_artifact))
    assert {"model.cu", "libmodel.so", "weights.bin", "manifest.json", "model.onnx"} <= files
    manifest = json.load(open(os.path.join(nvcc_artifact, "manifest.json")))
    assert manifest["device"] == "cuda" and manifest["options"]["cuda_archs"] == ["sm_80"]
    assert not manifest["options"]["cuda_emulate"]
    entries = fatbin_entries(os.path.join(nvcc_artifact, "libmodel.so"))
    assert ("elf", 80) in entries and ("ptx", 80) in entries, entries


def fatbin_entries(library: str) -> set[tuple[str, int]]:
    """(kind, architecture) of each entry of the CUDA fat binaries in a library: machine code
    ("elf") and PTX, as nvcc's fatbin headers describe them."""
    data = open(library, "rb").read()
    magic = struct.pack("<I", 0xBA55ED50)
    found, at = set(), data.find(magic)
    while at >= 0:
        _, _, header, size = struct.unpack_from("<IHHQ", data, at)
        entry, end = at + header, at + header + size
        while entry < end:
            kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", data, entry)
            found.add(({1: "ptx", 2: "elf"}.get(kind, str(kind)), struct.unpack_from("<I", data, entry + 28)[0]))
            entry += entry_header + entry_size
        at = data.find(magic, end)
    return found


@needs_nvcc
def test_without_a_gpu_the_artifact_falls_back_to_the_cpu(nvcc_artifact, monkeypatch):
    """No GPU: onnxruntime's warning, the CPU provider, and the model the artifact holds,
    compiled for the CPU, gives onnxruntime's results."""
    monkeypatch.delenv(cuda.EMULATE_ENV, raising=False)
    monkeypatch.setattr(cuda, "device_count", lambda: 0)
    ort_warning = "Specified provider 'CUDAExecutionProvider' is not in available provider names"
    with pytest.warns(UserWarning, match=ort_warning):
        sess = onnxc.InferenceSession(nvcc_artifact, providers=[CUDA, CPU])
    assert sess.get_providers() == [CPU]
    assert json.load(open(os.path.join(sess._folder, "manifest.json")))["device"] == "cpu"
    for n in (1, 4):
        np.testing.assert_allclose(sess.run(None, feed(n))[0], run_ort(small_model(), feed(n))[0], rtol=1e-5, atol=1e-6)


@needs_nvcc
def test_on_a_gpu_the_artifact_is_loaded_as_built_without_compiling(nvcc_artifact, gpu, no_compile):
    """Where a GPU of an architecture the build covers is (no nvcc needed), the session loads
    the artifact's own library and compiles nothing."""
    with pytest.raises(Loaded) as loaded:
        onnxc.InferenceSession(nvcc_artifact, providers=[CUDA, CPU])
    assert loaded.value.args[0] == nvcc_artifact
    with pytest.raises(Loaded):   # (an artifact of the CUDA build runs on its provider by default)
        onnxc.InferenceSession(nvcc_artifact)


@needs_nvcc
def test_a_gpu_the_build_does_not_cover_compiles_the_held_model(nvcc_artifact, gpu, no_compile, monkeypatch):
    monkeypatch.setattr(cuda, "archs", lambda device=0: ("sm_75",))
    with pytest.warns(UserWarning, match="built for sm_80, and GPU 0 is sm_75"), pytest.raises(NoCompile):
        onnxc.InferenceSession(nvcc_artifact, providers=[CUDA, CPU])
    monkeypatch.setattr(cuda, "archs", lambda device=0: ("sm_86",))   # (sm_80 machine code runs on sm_86)
    with pytest.raises(Loaded):
        onnxc.InferenceSession(nvcc_artifact, providers=[CUDA, CPU])


def test_an_emulated_artifact_runs_as_built_without_compiling(tmp_path, monkeypatch):
    """The same load path, run: an artifact of the emulated build, loaded by a session that
    emulates the CUDA runtime, runs its own library (nothing compiles) and matches onnxruntime."""
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")
    onnx.save(small_model(), str(tmp_path / "model.onnx"))
    compile_cli(str(tmp_path / "model.onnx"), str(tmp_path / "art"))
    monkeypatch.setattr(session_module, "compile_cached", lambda *a, **k: pytest.fail("compiled"))
    sess = onnxc.InferenceSession(str(tmp_path / "art"), providers=[CUDA, CPU])
    assert sess.get_providers() == [CUDA, CPU] and sess._folder == str(tmp_path / "art")
    # (TF32, the CUDA provider's default)
    np.testing.assert_allclose(sess.run(None, feed(5))[0], run_ort(small_model(), feed(5))[0], rtol=1e-2, atol=1e-3)


def test_the_held_model_is_checked_before_it_is_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")
    onnx.save(small_model(), str(tmp_path / "model.onnx"))
    compile_cli(str(tmp_path / "model.onnx"), str(tmp_path / "art"))
    with open(tmp_path / "art" / "model.onnx", "ab") as f:
        f.write(b"\0")
    with pytest.raises(onnxc.ModelError, match="model.onnx does not match its checksum"):
        onnxc.InferenceSession(str(tmp_path / "art"), providers=[CPU])


@pytest.mark.parametrize("args, message", [
    (["--target", "cuda", "--cuda-arch", "sm_8x"], "is not a GPU architecture"),
    (["--target", "cuda", "--cuda-arch", ","], "no GPU architecture given"),
    (["--cuda-arch", "sm_80"], "--cuda-arch needs --target cuda"),
    (["--target", "cuda", "--threads", "4"], "runs on one host thread"),
])
def test_cuda_arch_is_checked(tmp_path, capsys, args, message):
    onnx.save(small_model(), str(tmp_path / "model.onnx"))
    assert cli.main(["compile", str(tmp_path / "model.onnx"), "-o", str(tmp_path / "art"), *args]) != 0
    assert message in capsys.readouterr().err
