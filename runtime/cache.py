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
import json
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
    """Content hash of a model, external data files included.

    For a file, the hash is remembered in the cache's index under the file's identity
    (path, size, mtime, inode) with the stats of every file it covers, so an unchanged
    model is not read again.
    """
    if isinstance(source, onnx.ModelProto):
        return hashlib.sha256(source.SerializeToString(deterministic=True)).hexdigest()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return hashlib.sha256(bytes(source)).hexdigest()
    path = os.path.abspath(os.fspath(source))
    try:
        st = os.stat(path)
    except OSError as e:
        raise ModelError(f"cannot read the model file: {e}") from e
    identity = f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}"
    index = os.path.join(cache_root(), "index", hashlib.sha256(identity.encode()).hexdigest()[:32])
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(index, encoding="utf-8") as f:
            entry = json.load(f)
        if all(_stat_of(name) == [size, mtime] for name, size, mtime in entry["files"]):
            return entry["digest"]
    digest, files = _hash_model_file(path)
    os.makedirs(os.path.dirname(index), mode=0o700, exist_ok=True)
    _write_json_atomic(index, {"digest": digest, "files": [[name, *_stat_of(name)] for name in files]})
    return digest


def _stat_of(path: str) -> list:
    try:
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return [-1, -1]


def _hash_model_file(path: str) -> tuple[str, list[str]]:
    h = hashlib.sha256()
    files = [path]
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"cannot read the model file: {e}") from e
    h.update(data)
    if b"location" in data:  # cheap pre-check before parsing for external data references
        for location in _external_locations(data):
            h.update(location.encode())
            external = os.path.join(os.path.dirname(path), location)
            files.append(external)
            with contextlib.suppress(OSError):
                with open(external, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest(), files


def _write_json_atomic(path: str, data: object) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


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


_VERIFIED = ".verified"


def is_intact(folder: str) -> bool:
    """Library and weights match the manifest's checksums. A weights file verified once is
    trusted while its size and mtime stay those recorded then (the cache folder is user-only)."""
    try:
        manifest = read_manifest(folder)
        if _sha256_file(os.path.join(folder, manifest["library"])) != manifest["library_sha256"]:
            return False
        weights = os.path.join(folder, manifest["weights"])
        stamp = os.path.join(folder, _VERIFIED)
        with contextlib.suppress(OSError, ValueError):
            with open(stamp, encoding="utf-8") as f:
                if json.load(f) == _stat_of(weights):
                    return True
        if _sha256_file(weights) != manifest["weights_sha256"]:
            return False
        _write_json_atomic(stamp, _stat_of(weights))
        return True
    except (OSError, KeyError, ModelError):
        return False


def _mark_verified(folder: str) -> None:
    """A freshly built artifact's weights are those its manifest's checksum was computed
    from: record them as verified, so the first load does not hash them again."""
    with contextlib.suppress(OSError, KeyError, ModelError):
        weights = os.path.join(folder, read_manifest(folder)["weights"])
        _write_json_atomic(os.path.join(folder, _VERIFIED), _stat_of(weights))


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
            _mark_verified(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
