import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never write to the user's compile cache."""
    if "ONNXC_CACHE_DIR" not in os.environ:
        os.environ["ONNXC_CACHE_DIR"] = str(tmp_path_factory.mktemp("onnxc-cache"))
    # Builds for the input shapes a model runs at are tested in test_shape_tiers.py (every mode,
    # the default included). Elsewhere they would only add a compile to every test that runs a
    # model of symbolic dims twice, and load a library in the middle of the soak and memory tests.
    os.environ.setdefault("ONNXC_SPECIALISE_SHAPES", "off")
    # The tests' models are small: multi-threaded builds of them would run on one thread
    # (codegen/work.py), and the threaded kernels they check would not run. test_thread_pool.py
    # checks the rule itself.
    os.environ.setdefault("ONNXC_MIN_THREADED_WORK", "0")
    yield


# Suites too heavy for CI's budget. Each of their tests is marked with its suite; CI (a run whose
# -m does not name the suite) runs only those also marked `ci_slice`; naming the suite runs the
# whole of it: `python -m pytest -m sanitize` (README, "Tests").
HEAVY_SUITES = {
    "sanitize": "every conformance case under AddressSanitizer and UndefinedBehaviorSanitizer",
    "cuda_emulated": "every conformance case through the CUDA build, emulated on the CPU in forward, reverse or "
                     "shuffled order, and every case's CUDA refusal against expected_cuda_refusals.txt",
    "nvcc": "every conformance case's CUDA source compiled by nvcc",
    "package_conformance": "every conformance case as a --target c package, built and run on the host",
    "fuzz": "a long campaign of mutated models",
    "tsan": "multi-threaded builds under ThreadSanitizer: conformance cases and models at 2 and 4 threads",
    "mcu": "--target c packages run on emulated microcontroller boards (qemu-system-arm)",
    "cmsis_nn": "--cmsis-nn packages built with the pinned CMSIS-NN, bit for bit against the portable kernels",
    "soak": "long runs of a real model on 2 threads: 10,000 runs, and a session idle for a minute",
    "third_party_full": "every third-party model of tests/test_third_party.py against onnxruntime",
}


def pytest_configure(config):
    for name, what in HEAVY_SUITES.items():
        config.addinivalue_line("markers", f"{name}: {what} (CI runs the tests also marked ci_slice)")
    config.addinivalue_line("markers", "ci_slice: the part of a heavy suite that runs by default")
    config.addinivalue_line("markers", "requires_tool(present, reason): a tool the test needs (tests/tools.py)")


def pytest_runtest_setup(item):
    from tools import missing
    for mark in item.iter_markers("requires_tool"):
        if not mark.kwargs["present"]:
            missing(mark.kwargs["reason"])


def pytest_collection_modifyitems(config, items):
    named = set(re.findall(r"[A-Za-z_]\w*", config.option.markexpr or ""))
    keep, deselected = [], []
    for item in items:
        suites = {m.name for m in item.iter_markers() if m.name in HEAVY_SUITES}
        if suites and not suites & named and item.get_closest_marker("ci_slice") is None:
            deselected.append(item)
        else:
            keep.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    stats = terminalreporter.stats

    def count(kind, test):
        return sum(1 for r in stats.get(kind, []) if test in r.nodeid and r.when == "call")
    for test, title in (("test_node_case", "ONNX node conformance"), ("test_model_case", "ONNX model test suite")):
        passed, xfailed, failed = (count(kind, test) for kind in ("passed", "xfailed", "failed"))
        total = passed + xfailed + failed
        if total:
            terminalreporter.write_line(
                f"{title}: {passed} of {total} cases pass ({100.0 * passed / total:.1f}%); "
                f"{xfailed} expected failures, {failed} unexpected failures")
