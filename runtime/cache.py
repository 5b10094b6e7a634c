"""The compile cache: one artifact folder per (model bytes, options, onnxc version, toolchain).

Artifacts are built in a private temporary folder and renamed into place, so a
reader never sees a half-written one; a per-key lock keeps two processes from
building the same model twice. An artifact whose files fail their checksums is
rebuilt, never loaded.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
from typing import Callable, Iterator, Optional

import onnx

from .. import __version__
from ..compiler.errors import ModelError
from .loader import read_manifest


def cache_root() -> str:
    root = os.environ.get("ONNXC_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "onnxc")
    os.makedirs(root, mode=0o700, exist_ok=True)
    return root


def model_digest(source) -> str:
    """Content hash of a model, external data files included."""
    h = hashlib.sha256()
    if isinstance(source, onnx.ModelProto):
        h.update(source.SerializeToString(deterministic=True))
        return h.hexdigest()
    if isinstance(source, (bytes, bytearray, memoryview)):
        h.update(bytes(source))
        return h.hexdigest()
    path = os.fspath(source)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"cannot read the model file: {e}") from e
    h.update(data)
    if b"location" in data:  # cheap pre-check before parsing for external data references
        for location in _external_locations(data):
            h.update(location.encode())
            with contextlib.suppress(OSError):
                with open(os.path.join(os.path.dirname(path), location), "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest()


def _external_locations(data: bytes) -> list[str]:
    try:
        model = onnx.load_model_from_string(data)
    except Exception:
        return []
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    out = set()
    for t in _get_all_tensors(model):
        if uses_external_data(t):
            for entry in t.external_data:
                if entry.key == "location":
                    out.add(entry.value)
    return sorted(out)


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """onnxc's version and a hash of its own Python and template files: a changed kernel
    template or lowering never reuses a stale artifact."""
    from .. import codegen, compiler, templates
    h = hashlib.sha256(__version__.encode())
    for package in (compiler, codegen, templates):
        base = os.path.dirname(os.path.abspath(package.__file__))
        for folder, dirs, files in sorted(os.walk(base)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".py", ".j2")):
                    path = os.path.join(folder, name)
                    h.update(os.path.relpath(path, base).encode())
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()[:16]


def artifact_key(model_digest_hex: str, options_key: str, toolchain_id: str) -> str:
    h = hashlib.sha256()
    for part in (model_digest_hex, options_key, code_fingerprint(), toolchain_id):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def is_intact(folder: str) -> bool:
    try:
        manifest = read_manifest(folder)
        for name, key in ((manifest["library"], "library_sha256"), (manifest["weights"], "weights_sha256")):
            h = hashlib.sha256()
            with open(os.path.join(folder, name), "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != manifest[key]:
                return False
        return True
    except (OSError, KeyError, ModelError):
        return False


def get_or_build(key: str, build: Callable[[str], None], root: Optional[str] = None) -> str:
    """The artifact folder for ``key``, calling ``build(tmp_folder)`` if it is missing or damaged."""
    root = root or cache_root()
    final = os.path.join(root, key)
    if os.path.isdir(final) and is_intact(final):
        return final
    with _locked(os.path.join(root, f"{key}.lock")):
        if os.path.isdir(final):
            if is_intact(final):
                return final
            shutil.rmtree(final, ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix=f".{key}-", dir=root)
        try:
            build(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
