import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never write to the user's compile cache."""
    if "ONNXC_CACHE_DIR" not in os.environ:
        os.environ["ONNXC_CACHE_DIR"] = str(tmp_path_factory.mktemp("onnxc-cache"))
    yield


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
