"""The compile cache: one artifact folder per (model bytes, options, onnxc version, toolchain).

Artifacts are built in a private temporary folder and renamed into place, so a
reader never sees a half-written one; a per-key lock keeps two processes from
building the same model twice. An artifact whose files fail their checksums is
rebuilt, never loaded. Loading a library runs its code, so the cache folder must be
the user's alone: one that other users can write is refused.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from typing import Any, Callable, Iterator, Optional

import onnx
import xxhash

from .. import __version__
from ..compiler.errors import ModelError, ModelNotFound, UnsafeCacheError


def cache_root() -> str:
    root = os.environ.get("ONNXC_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "onnxc")
    os.makedirs(root, mode=0o700, exist_ok=True)
    check_private(root)
    return root


def check_private(root: str) -> None:
    """Refuses a cache folder another user could put a library in: one owned by someone else
    or writable by group or others, or one inside a folder anyone may rename things in (a
    world-writable folder without the sticky bit). Group-writable parents are let through:
    with per-user groups (umask 002) they are the norm, and the folder itself is checked."""
    real = os.path.realpath(root)
    st = os.stat(real)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise UnsafeCacheError(
            f"the compile cache folder {root!r} is not private (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):#o}): other users could plant code that onnxc would load. "
            f"Make it yours and user-only (chmod 700), or set ONNXC_CACHE_DIR to a private folder")
    parent = os.path.dirname(real)
    while True:
        st = os.stat(parent)
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise UnsafeCacheError(
                f"the compile cache folder {root!r} is inside {parent!r}, which every user can write "
                f"(mode {stat.S_IMODE(st.st_mode):#o}, no sticky bit): they could replace the cache. "
                f"Set ONNXC_CACHE_DIR to a folder under private parents")
        if parent == os.path.dirname(parent):
            return
        parent = os.path.dirname(parent)


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
    except FileNotFoundError as e:
        raise ModelNotFound(f"model file not found: {path}") from e
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


HASH_BLOCK = 1 << 22   # bytes read at a time when hashing a model file


def _hash_model_file(path: str) -> tuple[str, list[str]]:
    h = hashlib.sha256()
    files = [path]
    # (read in blocks through one buffer: a language model's file is hundreds of megabytes, and
    # reading it whole takes as much new memory again; the whole file is read only where it
    # names external data, whose locations are parsed from it)
    block = bytearray(HASH_BLOCK)
    view = memoryview(block)
    mentions_location = False
    tail = b""
    try:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(block):
                h.update(view[:n])
                if not mentions_location:
                    head = bytes(view[:min(n, 16)])
                    mentions_location = b"location" in tail + head or block.find(b"location", 0, n) >= 0
                    tail = bytes(view[max(n - 16, 0):n])
    except FileNotFoundError as e:
        raise ModelNotFound(f"model file not found: {path}") from e
    except OSError as e:
        raise ModelError(f"cannot read the model file: {e}") from e
    if mentions_location:  # cheap pre-check before parsing for external data references
        folder = os.path.realpath(os.path.dirname(path) or ".")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ModelError(f"cannot read the model file: {e}") from e
        for location in _external_locations(data):
            h.update(location.encode())
            external = os.path.join(os.path.dirname(path), location)
            real = os.path.realpath(external)
            if os.path.commonpath([folder, real]) != folder or not os.path.isfile(real):
                continue   # outside the model's folder, or no plain file (/dev/zero): the frontend refuses it
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
    """A cached artifact's manifest is the one it was built with, and its library and
    weights match the manifest's checksums."""
    return _damage(folder, cached=True) is None


def verify_artifact(folder: str) -> None:
    """Raises ModelError unless the library and weights of an artifact folder (one given by
    the user, not the cache) match its manifest's checksums."""
    if not os.path.isfile(os.path.join(folder, "manifest.json")):
        raise ModelError(f"{folder!r} is not an onnxc artifact (it has no manifest.json)")
    damage = _damage(folder, cached=False)
    if damage is not None:
        raise ModelError(f"{folder!r} is a damaged onnxc artifact ({damage}): compile the model again")


def _damage(folder: str, cached: bool) -> Optional[str]:
    """What is wrong with an artifact's files, or None.

    The build records the manifest's checksum and the weights file's identity in
    ``.verified``: a cached artifact without it, or with another manifest, is damaged (an
    artifact folder the user compiled has none; its manifest can only be parsed). Weights
    whose size, mtime, ctime and inode are those recorded are trusted without hashing them
    again: the cache folder is user-only, and no write leaves all four as they were."""
    try:
        with open(os.path.join(folder, "manifest.json"), "rb") as f:
            manifest_bytes = f.read()
        manifest_sha = hashlib.sha256(manifest_bytes).hexdigest()
        try:
            manifest = json.loads(manifest_bytes)
        except ValueError:
            return "manifest.json is not valid JSON"
        stamp = _read_stamp(folder)
        if cached and stamp.get("manifest_sha256") != manifest_sha:
            return "manifest.json is not the one the artifact was built with"
        if manifest["library"] is not None:   # (none: a model compiled per input signature)
            library = os.path.join(folder, manifest["library"])
            if sha256_file(library) != manifest["library_sha256"]:
                return f"{manifest['library']} does not match its checksum"
        weights = os.path.join(folder, manifest["weights"])
        if stamp.get("manifest_sha256") == manifest_sha and stamp.get("weights") == _identity_of(weights):
            return None
        if "weights_xxh3_128" in manifest:
            intact = xxh3_file(weights) == manifest["weights_xxh3_128"]
        else:   # (an artifact of an earlier onnxc)
            intact = sha256_file(weights) == manifest["weights_sha256"]
        if not intact:
            return f"{manifest['weights']} does not match its checksum"
        _write_stamp(folder, manifest_sha, weights)
        return None
    except OSError as e:
        return f"cannot read it: {e}"
    except (KeyError, TypeError) as e:
        return f"manifest.json lacks {e}"


def _identity_of(path: str) -> list:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _read_stamp(folder: str) -> dict:
    with contextlib.suppress(OSError, ValueError):
        with open(os.path.join(folder, _VERIFIED), encoding="utf-8") as f:
            stamp = json.load(f)
        if isinstance(stamp, dict):
            return stamp
    return {}


def _write_stamp(folder: str, manifest_sha: str, weights: str) -> None:
    """Best effort: a folder the user cannot write (a read-only artifact) is hashed each time."""
    with contextlib.suppress(OSError):
        _write_json_atomic(os.path.join(folder, _VERIFIED),
                           {"manifest_sha256": manifest_sha, "weights": _identity_of(weights)})


def _mark_verified(folder: str) -> None:
    """A freshly built artifact's weights are those its manifest's checksum was computed
    from: record them, and the manifest, so the first load hashes the library only."""
    with open(os.path.join(folder, "manifest.json"), "rb") as f:
        manifest_bytes = f.read()
    weights = os.path.join(folder, json.loads(manifest_bytes)["weights"])
    _write_json_atomic(os.path.join(folder, _VERIFIED),
                       {"manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
                        "weights": _identity_of(weights)})


def xxh3_file(path: str) -> str:
    """The file's XXH3 128-bit hash: the weights' checksum, against damage (it reads 13 GB/s,
    ten times SHA-256, and a language model's weights are hundreds of megabytes)."""
    return _file_digest(path, xxhash.xxh3_128())


def sha256_file(path: str) -> str:
    return _file_digest(path, hashlib.sha256())


def _file_digest(path: str, h: Any) -> str:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def get_or_build(key: str, build: Callable[[str], object], root: Optional[str] = None,
                 intact: Callable[[str], bool] = is_intact, seal: Callable[[str], None] = _mark_verified) -> str:
    """The artifact folder for ``key``, calling ``build(tmp_folder)`` if it is missing or damaged
    (``intact(folder)`` false); ``seal(tmp_folder)`` records what a later check compares."""
    root = root or cache_root()
    final = os.path.join(root, key)
    if os.path.isdir(final) and intact(final):
        _mark_used(final)
        return final
    with _locked(os.path.join(root, f"{key}.lock")):
        if os.path.isdir(final):
            if intact(final):
                return final
            shutil.rmtree(final, ignore_errors=True)
        elif os.path.lexists(final):
            os.unlink(final)
        for name in os.listdir(root):   # builds of this key that died halfway (we hold its lock)
            if name.startswith(f".{key}-"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix=f".{key}-", dir=root)
        try:
            build(tmp)
            seal(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


_KEY = re.compile(r"[0-9a-f]{32}")


def _mark_used(folder: str) -> None:
    """The folder's modification time is when the cache last handed it out (``clear --older-than``)."""
    with contextlib.suppress(OSError):
        os.utime(folder)


@dataclasses.dataclass
class Entry:
    """One artifact of the cache."""
    key: str
    folder: str
    manifest: dict
    bytes: int
    used: float           # when it was last built or handed out (seconds since the epoch)


def entries(root: Optional[str] = None) -> list[Entry]:
    """The cache's artifacts, the most recently used first."""
    root = root or cache_root()
    found = []
    for name in os.listdir(root):
        folder = os.path.join(root, name)
        if not _KEY.fullmatch(name) or not os.path.isdir(folder):
            continue
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
                manifest = json.load(f)
            size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
            found.append(Entry(name, folder, manifest if isinstance(manifest, dict) else {}, size,
                               os.stat(folder).st_mtime))
    return sorted(found, key=lambda e: -e.used)


def clear(older_than: Optional[float] = None, root: Optional[str] = None) -> tuple[int, int]:
    """Removes the cache's artifacts, or those unused for ``older_than`` seconds, each under its
    key's lock (never one being built); returns how many and their bytes."""
    root = root or cache_root()
    now = time.time()
    removed = freed = 0
    for entry in entries(root):
        if older_than is not None and now - entry.used < older_than:
            continue
        lock = os.path.join(root, f"{entry.key}.lock")
        with _locked(lock):
            shutil.rmtree(entry.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(lock)
        removed += 1
        freed += entry.bytes
    if older_than is None:   # (model digests, compiled templates and helper objects: remade as needed)
        for folder in ("index", "templates", "objects"):
            shutil.rmtree(os.path.join(root, folder), ignore_errors=True)
    else:
        from .object_cache import clear_objects
        clear_objects(older_than, root)
    return removed, freed
