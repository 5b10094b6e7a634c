"""The public API's type hints (``onnxc/py.typed``), checked with mypy: the public modules pass
the project's ``[tool.mypy]`` settings, user code written as for onnxruntime type-checks under
``--strict``, and user code that misuses the API is caught."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tools import require_module

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

REPO = Path(__file__).resolve().parents[1]

# The modules behind ``onnxc/__init__.py``'s exports.
PUBLIC_MODULES = ["onnxc/__init__.py", "onnxc/driver.py", "onnxc/runtime/session.py", "onnxc/runtime/options.py",
                  "onnxc/runtime/ortvalue.py", "onnxc/runtime/environment.py", "onnxc/_as_onnxruntime.py",
                  "onnxc/ray.py"]

USER_CODE = """\
from typing import Any

import numpy as np
import numpy.typing as npt

import onnxc

options = onnxc.SessionOptions()
options.intra_op_num_threads = 2
options.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
options.execution_mode = onnxc.ExecutionMode.ORT_SEQUENTIAL
options.log_severity_level = 3
options.enable_profiling = False
options.add_session_config_entry("session.intra_op.allow_spinning", "0")

sess = onnxc.InferenceSession("model.onnx", options, providers=["CPUExecutionProvider"])
input_names: list[str] = [i.name for i in sess.get_inputs()]
output_names: list[str] = [o.name for o in sess.get_outputs()]
providers: list[str] = sess.get_providers()
x = np.zeros((2, 3), dtype=np.float32)
outputs: list[npt.NDArray[Any]] = sess.run(None, {input_names[0]: x})

run_options = onnxc.RunOptions()
run_options.log_severity_level = 3
first = sess.run(output_names[:1], {"x": x}, run_options)[0]
total: float = float(first.sum())

binding = sess.io_binding()
binding.bind_cpu_input("x", x)
binding.bind_output("y")
sess.run_with_iobinding(binding)
copied: list[npt.NDArray[Any]] = binding.copy_outputs_to_cpu()
value = onnxc.OrtValue.ortvalue_from_numpy(x)
shape: list[int] = value.shape()

manifest: dict[str, Any] = onnxc.compile_model(
    "model.onnx", "build/model", onnxc.CompileOptions(optimization_level=1, march=""))
available: list[str] = onnxc.get_available_providers()
version: str = onnxc.__version__
"""

# Each line misuses the API; mypy must report every one (the hints are real, not Any).
MISUSES = {
    "thread_count": 'onnxc.SessionOptions().intra_op_num_threads = "four"',
    "feed_not_a_dict": 'onnxc.InferenceSession("model.onnx").run(None, [1.0])',
    "names_not_strings": 'onnxc.InferenceSession("model.onnx").run([0], {})',
    "unknown_option": 'onnxc.CompileOptions(optimisation_level=1)',
    "name_is_str": 'count: int = onnxc.InferenceSession("model.onnx").get_inputs()[0].name',
    "profiling_file_is_str": 'ended: int = onnxc.InferenceSession("model.onnx").end_profiling()',
}


def package_tree(dest: Path) -> Path:
    """``onnxc`` laid out as it is installed (pyproject's package-dir maps repository folders into
    the package), as links into the checkout, so mypy reads the package from the sources."""
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11+; the test environment has it)")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    package = dest / "onnxc"
    package.mkdir(parents=True)
    for entry in (REPO / "onnxc").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in config["tool"]["setuptools"]["package-dir"].items():
        if name != "onnxc" and name.count(".") == 1:
            (package / name.split(".")[1]).symlink_to(REPO / folder)
    return dest


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_module("mypy")
    return package_tree(tmp_path_factory.mktemp("typing"))


def mypy(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """mypy in ``tree`` with the project's settings and one cache for the module's runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
               "--cache-dir", str(tree / ".mypy_cache"), "--no-error-summary", "--show-error-codes", *args]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, timeout=300)


def test_public_modules_pass_mypy(tree: Path) -> None:
    proc = mypy(tree, *PUBLIC_MODULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_py_typed_marks_the_package() -> None:
    assert (REPO / "onnxc" / "py.typed").is_file()
    config = tomllib.loads((REPO / "pyproject.toml").read_text()) if tomllib else None
    if config is not None:
        assert "py.typed" in config["tool"]["setuptools"]["package-data"]["onnxc"]


def test_user_code_type_checks_strictly(tree: Path) -> None:
    """Code written as for onnxruntime checks under --strict: every public call it makes is
    typed (--disallow-untyped-calls) and returns what it declares (--warn-return-any)."""
    snippet = tree / "user_code.py"
    snippet.write_text(USER_CODE)
    proc = mypy(tree, "--strict", "--disallow-untyped-calls", "--follow-imports=silent", str(snippet.name))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_misuse_is_reported(tree: Path) -> None:
    snippet = tree / "misuse.py"
    lines = ["import onnxc", ""] + list(MISUSES.values())
    snippet.write_text("\n".join(lines) + "\n")
    proc = mypy(tree, "--follow-imports=silent", snippet.name)
    reported = {int(line.split(":")[1]) for line in proc.stdout.splitlines() if ": error:" in line}
    missed = [name for number, name in enumerate(MISUSES, start=3) if number not in reported]
    assert not missed, f"mypy accepted {missed}:\n{textwrap.indent(proc.stdout, '  ')}"
