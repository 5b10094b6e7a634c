"""What a user installs: the sdist and wheel built from the checkout hold every module, template
and py.typed, and the wheel, installed alone into a fresh virtual environment, compiles and runs
a model through ``onnxc.InferenceSession`` and the ``onnxc`` command."""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tools import missing, require_module

REPO = Path(__file__).resolve().parents[1]
# Where each folder of the checkout goes in the package (pyproject's package-dir).
PACKAGE_FOLDERS = {"onnxc": "onnxc", "compiler": "onnxc/compiler", "codegen": "onnxc/codegen",
                   "runtime": "onnxc/runtime", "templates": "onnxc/templates", "benchmarks": "onnxc/benchmarks"}
NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist", ".venv", ".pytest_cache",
                                     ".mypy_cache", "*.so", "*.o")
# pip's messages when a distribution cannot be had (no network, no index)
UNREACHABLE = re.compile(r"No matching distribution|Could not find a version|NewConnectionError|"
                         r"Temporary failure in name resolution|Network is unreachable")

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5
B = np.array([0.25, -0.5, 0.125], dtype=np.float32)


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W + B, 0)


def source_files(folder: str, *patterns: str) -> list[str]:
    """Files of a package folder matching ``patterns``, as paths inside the checkout."""
    found = {p for pattern in patterns for p in (REPO / folder).rglob(pattern) if "__pycache__" not in p.parts}
    return sorted(p.relative_to(REPO).as_posix() for p in found)


def in_package(path: str) -> str:
    """Where a file of the checkout goes in the package."""
    folder, rest = path.split("/", 1)
    return f"{PACKAGE_FOLDERS[folder]}/{rest}"


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist, and the wheel built from it (python -m build's order), from a copy of the
    checkout so the build leaves nothing in it."""
    require_module("build")
    work = tmp_path_factory.mktemp("dists")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    out = work / "out"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


@pytest.fixture(scope="module")
def installed(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no system site-packages) holding the wheel and its runtime
    dependencies, at the versions this environment has (so pip's cache serves them)."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    python = env_dir / "bin" / "python"
    constraints = env_dir / "constraints.txt"
    constraints.write_text("".join(f"{d.metadata['Name']}=={d.version}\n" for d in importlib.metadata.distributions()
                                   if d.metadata["Name"] and d.metadata["Name"].lower() != "onnxc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                           "--disable-pip-version-check", "--constraint", str(constraints), str(dists["wheel"])],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and UNREACHABLE.search(proc.stderr):
        missing(f"the wheel's dependencies cannot be downloaded: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return env_dir


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder outside the checkout with the model, an input and a private onnxc cache."""
    x = onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["s"]),
                               helper.make_node("Relu", ["s"], ["y"])], "affine_relu", [x], [y],
                              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "model.onnx"))
    np.save(tmp_path / "x.npy", np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4))
    (tmp_path / "cache").mkdir(mode=0o700)
    return tmp_path


def run_installed(env_dir: Path, workdir: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` from the environment's bin folder, in ``workdir``, with nothing of the checkout
    on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}
    env["ONNXC_CACHE_DIR"] = str(workdir / "cache")
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([str(env_dir / "bin" / command[0]), *command[1:]], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_wheel_holds_every_module_template_and_py_typed(dists: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    files = source_files("templates", "*.j2", "*.h") + ["onnxc/py.typed"]
    files += source_files("benchmarks/firmware", "*.c", "*.cc", "*.ld")   # firmware of the emulated boards (benchmarks/mcu.py)
    files += [name for folder in PACKAGE_FOLDERS for name in source_files(folder, "*.py")]
    assert len(source_files("templates", "*.j2")) > 100   # the glob sees the templates
    assert sorted({in_package(f) for f in files} - names) == []
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


def test_sdist_holds_the_templates(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    wanted = source_files("templates", "*.j2", "*.h") + ["pyproject.toml", "README.md", "onnxc/py.typed"]
    assert sorted(set(wanted) - names) == []


SESSION_SCRIPT = """\
import sys

import numpy as np

import onnxc

checkout = sys.argv[1]
assert not any(p and p.startswith(checkout) for p in sys.path), sys.path
assert onnxc.__file__.startswith(sys.prefix), onnxc.__file__
x = np.load("x.npy")
(y,) = onnxc.InferenceSession("model.onnx").run(None, {"x": x})
np.save("y_session.npy", y)
print(onnxc.__file__)
"""


def test_installed_wheel_runs_a_model(installed: Path, workdir: Path) -> None:
    (workdir / "session.py").write_text(SESSION_SCRIPT)
    proc = run_installed(installed, workdir, "python", "-I", "session.py", str(REPO))
    assert proc.stdout.strip().startswith(str(installed))
    x = np.load(workdir / "x.npy")
    np.testing.assert_allclose(np.load(workdir / "y_session.npy"), expected(x), rtol=1e-5, atol=1e-6)


def test_installed_command_compiles_and_runs(installed: Path, workdir: Path) -> None:
    run_installed(installed, workdir, "onnxc", "compile", "model.onnx", "-o", "artifact", "--quiet")
    assert (workdir / "artifact" / "manifest.json").is_file()
    run_installed(installed, workdir, "onnxc", "run", "artifact", "--input", "x=x.npy", "--output-dir", "out")
    x = np.load(workdir / "x.npy")
    np.testing.assert_allclose(np.load(workdir / "out" / "y.npy"), expected(x), rtol=1e-5, atol=1e-6)
