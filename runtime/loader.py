"""Loads a compiled artifact folder: the shared library through cffi (ABI mode) and
the weights file through a read-only memory map."""
from __future__ import annotations

import functools
import json
import mmap
import os
import threading
from typing import Any

import cffi
import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import ModelError, RuntimeFailure

_CDEF = """
size_t {p}_context_size(void);
int {p}_context_init(void *ctx, const void *weights, size_t weights_size);
void {p}_context_release(void *ctx);
int {p}_run(void *ctx, const void *const *inputs, const int64_t *in_shapes, void **outputs, int64_t *out_shapes);
void {p}_free(void *p);
const char *{p}_error(const void *ctx);
size_t {p}_arena_bytes(void);
"""


@functools.lru_cache(maxsize=None)
def _ffi(prefix: str) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(_CDEF.format(p=prefix))
    return ffi


def read_manifest(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError(f"{folder!r} is not an onnxc artifact: {e}") from e


class CompiledModel:
    """A loaded artifact. ``run`` is thread-safe: each concurrent call gets its own context."""

    def __init__(self, folder: str, manifest: dict[str, Any] | None = None) -> None:
        self.folder = folder
        self.manifest = manifest or read_manifest(folder)
        prefix = self.manifest["prefix"]
        self.ffi = _ffi(prefix)
        self.lib = self.ffi.dlopen(os.path.join(folder, self.manifest["library"]))
        self._fn = {name: getattr(self.lib, f"{prefix}_{name}") for name in
                    ("context_size", "context_init", "context_release", "run", "free", "error")}
        self._map_weights()
        self.inputs = self.manifest["inputs"]
        self.outputs = self.manifest["outputs"]
        self._in_dtypes = [dt.by_name(i["dtype"]) for i in self.inputs]
        self._out_dtypes = [dt.by_name(o["dtype"]) for o in self.outputs]
        self._out_ranks = [len(o["shape"]) for o in self.outputs]
        self._pool: list[Any] = []
        self._lock = threading.Lock()

    def _map_weights(self) -> None:
        path = os.path.join(self.folder, self.manifest["weights"])
        size = os.path.getsize(path)
        self._weights_map = None
        self._weights_ptr = self.ffi.NULL
        self._weights_size = size
        if size:
            with open(path, "rb") as f:
                self._weights_map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._weights_ptr = self.ffi.from_buffer("char[]", self._weights_map)

    def _new_context(self) -> Any:
        ctx = self.ffi.new("char[]", self._fn["context_size"]())
        if self._fn["context_init"](ctx, self._weights_ptr, self._weights_size) != 0:
            raise RuntimeFailure(self.ffi.string(self._fn["error"](ctx)).decode(errors="replace"))
        return self.ffi.gc(ctx, self._fn["context_release"])

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Run on contiguous arrays already checked against the model's inputs."""
        ffi = self.ffi
        with self._lock:
            ctx = self._pool.pop() if self._pool else None
        if ctx is None:
            ctx = self._new_context()
        try:
            in_ptrs = ffi.new("void *[]", max(len(arrays), 1))
            keep = []
            for i, a in enumerate(arrays):
                buf = ffi.from_buffer(a) if a.nbytes else ffi.NULL
                keep.append(buf)
                in_ptrs[i] = buf
            dims = [d for a in arrays for d in a.shape]
            in_shapes = ffi.new("int64_t[]", dims or [0])
            out_ptrs = ffi.new("void *[]", max(len(self.outputs), 1))
            out_shapes = ffi.new("int64_t[]", max(sum(self._out_ranks), 1))
            rc = self._fn["run"](ctx, in_ptrs, in_shapes, out_ptrs, out_shapes)
            if rc != 0:
                msg = ffi.string(self._fn["error"](ctx)).decode(errors="replace")
                raise RuntimeFailure(f"running the model failed: {msg}")
            results = []
            pos = 0
            for i, (dtype, rank) in enumerate(zip(self._out_dtypes, self._out_ranks)):
                shape = tuple(out_shapes[pos + j] for j in range(rank))
                pos += rank
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                owned = ffi.gc(out_ptrs[i], self._fn["free"])
                results.append(np.frombuffer(ffi.buffer(owned, nbytes), dtype=dtype.np).reshape(shape))
            return results
        finally:
            with self._lock:
                self._pool.append(ctx)
