"""Helper objects in the compile cache: object files of the shared kernel helpers
(codegen/helper_objects.py), one per (unit source, compiler, flags, CPU features).

Each lives in ``objects/<key>/`` of the cache: the unit it was compiled from (``helper.c``),
the object (``helper.o``) and ``object.json``, which records the key, the toolchain and the
checksums of both. An entry is linked only when all of them agree: the key is the one its
source and toolchain give, the files match their checksums, and the entry is the user's alone.
Anything else (a truncated or swapped object, a record of another entry, a folder others can
write) is rebuilt. Builds go through the artifact cache's ``get_or_build``: a private temporary
folder renamed into place under the key's lock, so concurrent builders make one entry and no
reader sees half of one. A library links the object when it is built and never opens it
again, so cached loads of a model do not read this folder.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from typing import Callable, Optional

from . import cache

OBJECTS = "objects"
SOURCE = "helper.c"
OBJECT = "helper.o"
RECORD = "object.json"


def object_key(source: str, identity: str) -> str:
    """The cache key of the object compiled from ``source`` by the toolchain ``identity``."""
    h = hashlib.sha256()
    for part in (hashlib.sha256(source.encode()).hexdigest(), identity):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def helper_object(source: str, identity: str, build: Callable[[str, str], float],
                  root: Optional[str] = None) -> tuple[str, float]:
    """The path of the object compiled from the C unit ``source`` by the toolchain ``identity``,
    and the compiler's CPU seconds when this call compiled it (``build(source_path,
    object_path)``, which returns them), else 0."""
    folder = objects_root(root)
    key = object_key(source, identity)
    seconds = [0.0]

    def make(tmp: str) -> None:
        with open(os.path.join(tmp, SOURCE), "w", encoding="utf-8") as f:
            f.write(source)
        seconds[0] = build(os.path.join(tmp, SOURCE), os.path.join(tmp, OBJECT))
        record = {"key": key, "identity": identity, "source_sha256": _sha256(source.encode()),
                  "object_sha256": cache.sha256_file(os.path.join(tmp, OBJECT))}
        with open(os.path.join(tmp, RECORD), "w", encoding="utf-8") as f:
            json.dump(record, f)

    entry = cache.get_or_build(key, make, root=folder, intact=is_intact, seal=_seal)
    return os.path.join(entry, OBJECT), seconds[0]


def objects_root(root: Optional[str] = None) -> str:
    """The cache's folder of helper objects, made user-only. One that is not the user's alone
    (another owner, writable by group or others, a link) may hold anyone's objects: it is moved
    aside and removed, and a new one made."""
    root = root or cache.cache_root()
    folder = os.path.join(root, OBJECTS)
    with contextlib.suppress(FileNotFoundError):
        if not _private(folder):
            unsafe = tempfile.mkdtemp(prefix=".objects-refused-", dir=root)
            os.rename(folder, os.path.join(unsafe, OBJECTS))
            shutil.rmtree(unsafe, ignore_errors=True)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def is_intact(entry: str) -> bool:
    """The entry's source, object and record agree with each other and its key, and nobody but
    the user can write them."""
    try:
        if not all(_private(p) for p in (entry, *(os.path.join(entry, n) for n in (SOURCE, OBJECT, RECORD)))):
            return False
        with open(os.path.join(entry, RECORD), encoding="utf-8") as f:
            record = json.load(f)
        with open(os.path.join(entry, SOURCE), "rb") as f:
            source = f.read()
        return (isinstance(record, dict) and record.get("key") == os.path.basename(entry)
                and record.get("source_sha256") == _sha256(source)
                and object_key(source.decode(), str(record.get("identity"))) == record["key"]
                and record.get("object_sha256") == cache.sha256_file(os.path.join(entry, OBJECT)))
    except (OSError, ValueError):
        return False


def clear_objects(older_than: float, root: str) -> None:
    """Removes the helper objects unused for ``older_than`` seconds, each under its key's lock."""
    folder = os.path.join(root, OBJECTS)
    if not os.path.isdir(folder):
        return
    now = time.time()
    for name in os.listdir(folder):
        entry = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if os.path.isdir(entry) and not name.startswith(".") and now - os.stat(entry).st_mtime >= older_than:
                with cache._locked(os.path.join(folder, f"{name}.lock")):
                    shutil.rmtree(entry, ignore_errors=True)
                os.unlink(os.path.join(folder, f"{name}.lock"))


def _private(path: str) -> bool:
    st = os.lstat(path)
    return not stat.S_ISLNK(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _seal(tmp: str) -> None:
    """A new entry's files are the user's alone (a temporary folder is, its files follow the umask)."""
    for name in (SOURCE, OBJECT, RECORD):
        os.chmod(os.path.join(tmp, name), 0o600)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
