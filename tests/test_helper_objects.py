"""Helper objects: the shared kernel helpers (GEMM, Winograd) compiled once into objects the
compile cache keeps by their source, compiler and flags, and linked into every model that calls
them. A second model compiles only its own units; a damaged, swapped or foreign object, or an
objects folder others can write, is rebuilt, never linked; processes building the same object
at once make one."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from onnxc import driver
from onnxc.codegen import helper_objects
from onnxc.codegen.toolchain import Toolchain, target_macros
from onnxc.runtime import cache, object_cache

SOURCE = "int onnxc_answer(void) { return 42; }\n"
OTHER_SOURCE = "int onnxc_answer(void) { return 43; }\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(root))
    return root


@pytest.fixture
def builds():
    """A helper-object builder (the toolchain's) that counts its calls."""
    calls = []
    toolchain = Toolchain()

    def build(source: str, output: str) -> float:
        calls.append(source)
        return toolchain.build_object(source, output)
    build.calls = calls
    build.identity = toolchain.object_identity()
    return build


def get(source: str, builds) -> str:
    """The object of ``source``, which must be intact; the compiler's CPU time is reported when
    this call built it, and only then."""
    before = len(builds.calls)
    path, seconds = object_cache.helper_object(source, builds.identity, builds)
    assert object_cache.is_intact(os.path.dirname(path))
    assert (seconds > 0) == (len(builds.calls) > before)
    return path


def entry_of(path: str) -> str:
    return os.path.dirname(path)


def truncate_half(path: str) -> None:
    os.truncate(path, os.path.getsize(path) // 2)


def test_an_object_is_built_once_and_then_found(cache_dir, builds):
    first = get(SOURCE, builds)
    assert get(SOURCE, builds) == first and len(builds.calls) == 1
    other = get(OTHER_SOURCE, builds)
    assert other != first and len(builds.calls) == 2
    record = json.loads(open(os.path.join(entry_of(first), object_cache.RECORD)).read())
    assert record["key"] == os.path.basename(entry_of(first)) == object_cache.object_key(SOURCE, builds.identity)
    assert record["object_sha256"] == cache.sha256_file(first)
    # (another toolchain identity, e.g. other flags, is another object)
    assert object_cache.object_key(SOURCE, builds.identity + " -O1") != record["key"]


def swap_with_other_object(path: str, builds) -> None:
    other = get(OTHER_SOURCE, builds)
    shutil.copyfile(other, path)


def move_other_entry_here(path: str, builds) -> None:
    """Another key's entry, consistent in itself, put in this key's place."""
    other = entry_of(get(OTHER_SOURCE, builds))
    shutil.rmtree(entry_of(path))
    shutil.copytree(other, entry_of(path))


def edit_source(path: str, builds) -> None:
    with open(os.path.join(entry_of(path), object_cache.SOURCE), "a") as f:
        f.write("/* planted */\n")


def let_others_write_object(path: str, builds) -> None:
    os.chmod(path, 0o666)


def let_others_write_entry(path: str, builds) -> None:
    os.chmod(entry_of(path), 0o777)


DAMAGES = {
    "object truncated": lambda path, builds: truncate_half(path),
    "object removed": lambda path, builds: os.unlink(path),
    "object swapped for another": swap_with_other_object,
    "record removed": lambda path, builds: os.unlink(os.path.join(entry_of(path), object_cache.RECORD)),
    "record truncated": lambda path, builds: truncate_half(os.path.join(entry_of(path), object_cache.RECORD)),
    "another key's entry": move_other_entry_here,
    "source edited": edit_source,
    "object writable by others": let_others_write_object,
    "entry writable by others": let_others_write_entry,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_or_foreign_object_is_rebuilt_not_linked(damage, cache_dir, builds):
    path = get(SOURCE, builds)
    intact = open(path, "rb").read()
    DAMAGES[damage](path, builds)
    assert not object_cache.is_intact(entry_of(path))
    before = len(builds.calls)
    assert get(SOURCE, builds) == path
    assert len(builds.calls) == before + 1
    assert open(path, "rb").read() == intact   # (the compiler's output is deterministic)
    assert stat.S_IMODE(os.stat(entry_of(path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o720], ids=oct)
def test_an_objects_folder_others_can_write_is_replaced(mode, cache_dir, builds):
    path = get(SOURCE, builds)
    folder = os.path.dirname(entry_of(path))
    planted = os.path.join(folder, "planted")
    os.mkdir(planted)
    os.chmod(folder, mode)
    assert get(SOURCE, builds) == path and len(builds.calls) == 2
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert not os.path.exists(planted)
    assert [n for n in os.listdir(cache_dir) if n.startswith(".objects")] == []


def test_an_objects_folder_that_is_a_link_is_replaced(cache_dir, builds, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache.cache_root()
    os.symlink(elsewhere, cache_dir / object_cache.OBJECTS)
    path = get(SOURCE, builds)
    assert not os.path.islink(cache_dir / object_cache.OBJECTS)
    assert os.listdir(elsewhere) == [] and len(builds.calls) == 1
    assert os.path.realpath(path).startswith(os.path.realpath(cache_dir))


PROCESSES = 4

WORKER = textwrap.dedent("""
    import json, os, sys, time
    from onnxc.codegen.toolchain import Toolchain
    from onnxc.runtime import object_cache
    toolchain = Toolchain()
    built = []
    def slow_build(source, output):
        built.append(source)
        time.sleep(0.5)   # every process arrives while the first one builds
        return toolchain.build_object(source, output)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.001)
    path, _ = object_cache.helper_object(sys.argv[1], toolchain.object_identity(), slow_build)
    print(json.dumps({"built": len(built), "path": path, "intact": object_cache.is_intact(os.path.dirname(path))}))
""")


def test_processes_building_the_same_object_at_once_make_one(tmp_path, cache_dir):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, SOURCE, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["built"] for r in reports) == 1, [r["built"] for r in reports]
    assert len({r["path"] for r in reports}) == 1 and all(r["intact"] for r in reports)
    folder = cache_dir / object_cache.OBJECTS
    assert sorted(n for n in os.listdir(folder) if not n.endswith(".lock")) == [
        os.path.basename(os.path.dirname(reports[0]["path"]))]


def matmul_relu_model(n: int) -> onnx.ModelProto:
    """Y = relu(X W): a float32 GEMM with an epilogue, through the GEMM helper."""
    w = onnx.numpy_helper.from_array(np.random.default_rng(n).standard_normal((64, n)).astype(np.float32), "w")
    return make_model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                      [("x", T.FLOAT, [7, 64])], [("y", T.FLOAT, [7, n])], [w])


def compile_recording(model: onnx.ModelProto, folder) -> list[tuple[str, float]]:
    """Compiles ``model`` into ``folder``; returns each unit reported built, with its CPU time."""
    units = []
    driver.compile_model(model, folder, driver.CompileOptions(),
                         on_stage=lambda stage, info: units.append((info["unit"], info["cpu"]))
                         if stage == "compile" else None)
    return units


def check_against_onnxruntime(model: onnx.ModelProto, folder) -> None:
    x = np.random.default_rng(1).standard_normal((7, 64)).astype(np.float32)
    got = onnxc.InferenceSession(str(folder)).run(None, {"x": x})[0]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_second_model_links_the_gemm_object_the_first_one_built(cache_dir, tmp_path):
    first, second = matmul_relu_model(40), matmul_relu_model(72)
    compile_recording(first, tmp_path / "a")   # (its object built beside its loading, or by its build)
    [entry] = [e for e in (cache_dir / object_cache.OBJECTS).iterdir() if e.is_dir()]
    built = (entry / object_cache.OBJECT).stat().st_mtime_ns
    units = dict(compile_recording(second, tmp_path / "b"))
    assert units["helpers_gemm.c"] == 0 and units["model.c"] > 0   # (found in the cache: nothing compiled)
    assert (entry / object_cache.OBJECT).stat().st_mtime_ns == built
    for model, folder in ((first, tmp_path / "a"), (second, tmp_path / "b")):
        check_against_onnxruntime(model, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["helper_units"] == ["helpers_gemm.c"]
    # the folder keeps the helper's unit, the same for both models; the model's units only declare it
    assert (tmp_path / "a" / "helpers_gemm.c").read_text() == (tmp_path / "b" / "helpers_gemm.c").read_text()
    model_c = (tmp_path / "a" / "model.c").read_text()
    assert "onnxc_sgemm_tile" not in model_c and "ONNXC_HELPER void onnxc_sgemm(" in model_c


def test_a_damaged_gemm_object_is_rebuilt_when_the_next_model_links_it(cache_dir, tmp_path):
    model = matmul_relu_model(40)
    compile_recording(model, tmp_path / "a")
    [entry] = [e for e in (cache_dir / object_cache.OBJECTS).iterdir() if e.is_dir()]
    size = (entry / object_cache.OBJECT).stat().st_size
    truncate_half(entry / object_cache.OBJECT)
    compile_recording(matmul_relu_model(72), tmp_path / "b")
    assert object_cache.is_intact(str(entry)) and (entry / object_cache.OBJECT).stat().st_size == size
    check_against_onnxruntime(matmul_relu_model(72), tmp_path / "b")


def test_the_artifact_folder_rebuilds_its_library_by_hand(cache_dir, tmp_path):
    """Its units and helper units link into a library with no undefined symbol of the model's."""
    compile_recording(matmul_relu_model(40), tmp_path / "a")
    folder = tmp_path / "a"
    sources = sorted(str(p) for p in folder.glob("*.c"))
    assert os.path.join(folder, "helpers_gemm.c") in sources
    flags = Toolchain().flags()
    proc = subprocess.run([Toolchain().cc, *flags, *sources, "-Wl,-z,defs", "-o", str(tmp_path / "by_hand.so"),
                           "-lm"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_packages_and_cuda_builds_keep_their_helpers_in_their_source():
    for target in ("c", "cuda"):
        emitted = driver.generate_source(matmul_relu_model(40), driver.CompileOptions(target=target,
                                                                                      cuda_emulate=True))
        assert emitted.helper_units == {}, target
    package = driver.generate_source(matmul_relu_model(40), driver.CompileOptions(target="c"))
    assert "onnxc_sgemm_tile" in package.source


def test_every_shared_helper_unit_names_its_file():
    assert helper_objects.unit_name("c/helpers/gemm.c.j2") == "helpers_gemm.c"
    assert {helper_objects.unit_name(h) for h in helper_objects.SHARED} == {
        "helpers_gemm.c", "helpers_qgemm.c", "helpers_winograd_f2.c", "helpers_winograd_f4.c"}


def test_units_and_helper_objects_get_o2_with_the_vectorizer_of_o3(monkeypatch):
    toolchain = Toolchain()
    if "__clang__" in target_macros(toolchain.cc, ()):   # (the units' flags are GCC's)
        assert toolchain.unit_flags() == toolchain.flags()
        return
    assert toolchain.flags()[0] == "-O3"
    assert toolchain.unit_flags()[:2] == ["-O2", "-fvect-cost-model=dynamic"]
    assert toolchain.unit_flags()[2:] == toolchain.flags()[1:]
    assert "units=-O2 -fvect-cost-model=dynamic" in toolchain.identity()   # (part of the artifact key)
    # a helper object is compiled with the units' flags, and its cache key says so
    assert "|" + " ".join(toolchain.unit_flags()) + "|" in toolchain.object_identity()
    commands = []
    monkeypatch.setattr("onnxc.codegen.toolchain._run_units",
                        lambda cmds, jobs, on_unit, helpers=(): (commands.extend(c for c, _ in cmds),
                                                                on_unit("helpers_gemm.c", 1, 0.0, 0.0)))
    toolchain.build_object("helpers_gemm.c", "helpers_gemm.o")
    assert commands == [[toolchain.cc, *toolchain.unit_flags(), "-c", "helpers_gemm.c", "-o", "helpers_gemm.o"]]
    assert Toolchain(opt="-O1").unit_flags() == Toolchain(opt="-O1").flags()


def test_clearing_the_cache_removes_helper_objects_by_age(cache_dir, builds):
    path = get(SOURCE, builds)
    cache.clear(older_than=3600.0)
    assert os.path.isfile(path)
    cache.clear(older_than=0.0)
    assert not os.path.exists(entry_of(path))
    get(SOURCE, builds)
    cache.clear()
    assert not os.path.exists(cache_dir / object_cache.OBJECTS)


def _objects_in_cache(root) -> list[str]:
    folder = root / object_cache.OBJECTS
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.exists() else []


def conv3x3_matmul_model() -> onnx.ModelProto:
    """A 3x3 convolution that Winograd computes, then a MatMul: the GEMM's and a Winograd helper."""
    rng = np.random.default_rng(3)
    w = onnx.numpy_helper.from_array(rng.standard_normal((64, 64, 3, 3)).astype(np.float32), "w")
    m = onnx.numpy_helper.from_array(rng.standard_normal((28, 40)).astype(np.float32), "m")
    return make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                       helper.make_node("MatMul", ["c", "m"], ["y"])],
                      [("x", T.FLOAT, [1, 64, 28, 28])], [("y", T.FLOAT, [1, 64, 28, 40])], [w, m])


@pytest.mark.parametrize("threads", [1, 2])
def test_helper_units_built_before_the_build_are_the_ones_it_links(threads):
    """The GEMM's helper object is compiled beside the loading and optimizing of a model with a
    GEMM-like op (driver.py, GEMM_OPS), the other helper objects as soon as code generation asks
    for them (EmitOptions.on_shared_helper): each unit made then is, byte for byte, the one the
    model's build asks the cache for, so the build finds it there."""
    from onnxc.codegen.c_emitter import gemm_helper_unit
    captured = {}
    original = driver._emit_and_build

    def spy(source, output_dir, options, command, descs, stages, toolchain, emit_options, on_loaded, prefetch,
            *rest):
        requested = {}
        emit_options = dataclasses.replace(emit_options,
                                           on_shared_helper=lambda name, text: requested.update({name: text}))
        captured.update(opt=emit_options, requested=requested)
        return original(source, None, options, command, descs, stages, toolchain, emit_options, on_loaded, prefetch,
                        *rest)
    import dataclasses
    import unittest.mock
    with unittest.mock.patch.object(driver, "_emit_and_build", spy):
        emitted = driver._compile(conv3x3_matmul_model(), "unused", driver.CompileOptions(threads=threads), None, [],
                                  driver._Stages(None))
    names = set(emitted.helper_units)
    assert "helpers_gemm.c" in names and any(n.startswith("helpers_winograd") for n in names)
    assert captured["requested"] == emitted.helper_units
    assert emitted.helper_units["helpers_gemm.c"] == gemm_helper_unit(captured["opt"])["helpers_gemm.c"]


def test_a_model_with_a_matmul_gets_the_gemm_object_while_it_loads_and_one_without_none(cache_dir, tmp_path):
    add = make_model([helper.make_node("Add", ["x", "x"], ["y"])], [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])])
    assert not driver._calls_gemm(driver._optimize(add, driver.CompileOptions(), [], driver._Stages(None)))
    driver.compile_model(add, tmp_path / "add", driver.CompileOptions())
    assert _objects_in_cache(cache_dir) == []
    driver.compile_model(matmul_relu_model(40), tmp_path / "mm", driver.CompileOptions())
    assert len(_objects_in_cache(cache_dir)) == 1
    import threading   # (a compile leaves no thread of its own running)
    assert not [t for t in threading.enumerate() if t.name == "onnxc-helper-prefetch"]
    units = dict(compile_recording(conv3x3_matmul_model(), tmp_path / "conv"))   # (+ a Winograd object)
    assert len(_objects_in_cache(cache_dir)) == 2 and all(cpu > 0 for name, cpu in units.items()
                                                           if name.startswith("helpers_winograd"))
    # a MatMul inside a Loop's body counts too
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_out"]),
                              helper.make_node("MatMul", ["v", "v"], ["v_out"])], "body",
                             [helper.make_tensor_value_info("i", T.INT64, []),
                              helper.make_tensor_value_info("cond", T.BOOL, []),
                              helper.make_tensor_value_info("v", T.FLOAT, [2, 2])],
                             [helper.make_tensor_value_info("cond_out", T.BOOL, []),
                              helper.make_tensor_value_info("v_out", T.FLOAT, [2, 2])])
    loop = make_model([helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body)],
                      [("n", T.INT64, []), ("c", T.BOOL, []), ("x", T.FLOAT, [2, 2])], [("y", T.FLOAT, [2, 2])])
    assert driver._calls_gemm(driver.frontend.build_graph(driver._load(loop, driver.CompileOptions())))
