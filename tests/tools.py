"""What a test needs from outside Python: tools (compilers, emulators, valgrind), packages and
downloads, and what happens when one cannot be had.

Under ``ONNXC_REQUIRE_TOOLS=1`` (set by ``.ci/run``) a missing tool fails the test: CI
installs everything the suite needs, so a missing one is a broken setup, never a reason to
stay green. Elsewhere the test is skipped with the reason, which ``-rs`` prints.
"""
from __future__ import annotations

import importlib
import os
import platform
import shutil
import subprocess
from types import ModuleType
from typing import Any, Iterable, NoReturn

import pytest

REQUIRE_TOOLS_ENV = "ONNXC_REQUIRE_TOOLS"


def tools_required() -> bool:
    return os.environ.get(REQUIRE_TOOLS_ENV) == "1"


def missing(reason: str) -> NoReturn:
    """A tool, package or download this test needs cannot be had."""
    if tools_required():
        pytest.fail(f"{reason} ({REQUIRE_TOOLS_ENV}=1: what a test needs must be installed)", pytrace=False)
    pytest.skip(reason)


def requires(present: bool, reason: str) -> pytest.MarkDecorator:
    """A mark for a test that needs something (``present`` says whether it is here): the test
    calls :func:`missing` with ``reason`` before it starts (conftest.py) when it is not."""
    return pytest.mark.requires_tool(present=present, reason=reason)


def require_module(name: str) -> ModuleType:
    """The Python package ``name`` (a pinned test dependency), or :func:`missing`."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"needs the Python package {name} ({e})")


def ensure_tools(needs: dict[str, str]) -> None:
    """Installs the Debian packages of what is missing (a program, or an absolute path a package
    puts there -> the package), or calls :func:`missing` with the reason."""
    def present(thing: str) -> bool:
        return os.path.exists(thing) if thing.startswith("/") else shutil.which(thing) is not None

    absent = sorted({pkg for thing, pkg in needs.items() if not present(thing)})
    if not absent:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        missing(f"needs {', '.join(absent)} (Debian packages; no apt-get as root here to install them)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *absent]
    proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=900)
        proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1800)
    if not all(present(thing) for thing in needs):
        missing(f"could not install {', '.join(absent)}: {proc.stderr.strip()[-300:]}")


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def require_system_libraries(names: Iterable[str]) -> None:
    """The system libraries (onnxc/codegen/system_libraries.py) a model's kernels link, built
    against by the C compiler the tests use; or :func:`missing` naming their Debian packages."""
    from onnxc.codegen.system_libraries import LIBRARIES, missing_libraries
    absent = missing_libraries(os.environ.get("CC", "cc"), names)
    if absent:
        missing("needs the system libraries " + ", ".join(f"{n} (Debian package {LIBRARIES[n].debian})" for n in absent))


def require_libraries_of(model: Any) -> None:
    """The system libraries an ONNX model's operators link (ImageDecoder: the image codecs),
    through :func:`require_system_libraries`."""
    from onnxc.compiler.ops.image_decoder import LIBRARIES
    if any(node.op_type == "ImageDecoder" for node in model.graph.node):
        require_system_libraries(LIBRARIES)

