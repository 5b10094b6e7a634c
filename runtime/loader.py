"""Loads a compiled artifact folder: the shared library through cffi (ABI mode) and
the weights file through a read-only memory map."""
from __future__ import annotations

import ctypes
import functools
import json
import math
import mmap
import os
import sys
import threading
import weakref
from typing import Any

import cffi
import numpy as np

from ..codegen import abi
from ..compiler import dtypes as dt
from ..compiler.errors import InvalidArgument, ModelError, RuntimeFailure
from . import environment
from .cpu import check_runs_here
from .device import ON_DEVICE, DeviceArray

PROFILE_EVENTS = 1 << 16  # node events one profiled run keeps


@functools.lru_cache(maxsize=None)
def _ffi(prefix: str) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(abi.cdef(prefix))
    return ffi


# What an empty input points at: C may not be handed NULL even for zero bytes (memcpy(d, NULL, 0)
# is undefined behaviour).
_EMPTY = cffi.FFI().new("char[16]")


def read_manifest(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError(f"{folder!r} is not an onnxc artifact: {e}") from e


# Multi-threaded builds made by GCC run on the model's own thread pool (c/helpers/pool.c.j2)
# and link no OpenMP runtime; builds by other compilers use their OpenMP runtime, for which
# what follows holds. GNU libgomp's idle threads spin for about a millisecond
# before they sleep, which costs nothing on an idle machine and a lot where other processes
# (or other sessions) want the same cores: a spinning thread holds a core that the thread
# it waits for needs. Unless the user chose a policy, the spin is cut to a few microseconds,
# still enough for back-to-back kernels to find their threads awake. libgomp reads these
# variables when the first multi-threaded model loads it.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")

# The OpenMP runtime a model library brings in keeps its worker threads after the sessions
# are gone; unloading it with the last model library (when its sessions are collected, at
# the latest at exit) pulls the code out from under them, and a thread that is still
# spinning (OMP_WAIT_POLICY=active) crashes the process. So the runtime stays loaded.
_OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so")
_pinned_openmp: list[ctypes.CDLL] = []


def _pin_openmp_runtime() -> None:
    """Holds a reference to an OpenMP runtime already loaded (by a model library) for the
    life of the process."""
    if _pinned_openmp or not hasattr(os, "RTLD_NOLOAD"):
        return
    for name in _OPENMP_RUNTIMES:
        try:
            _pinned_openmp.append(ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL))
        except OSError:
            continue


# Model libraries not closed yet. Held here, a library and its releasers never become
# garbage, so the GC cannot tear them apart while a context or output it must release waits
# in a collected cycle.
_open_libraries: set[_Library] = set()


class _Release:
    """The destructor of a context or output: calls the library's release function, then
    tells the library one fewer object needs it."""

    def __init__(self, library: _Library, function: Any) -> None:
        self.library = library
        self.function = function

    def __call__(self, pointer: Any) -> None:
        self.function(pointer)
        self.library._pending.pop()
        self.library._close_if_unused()


class _Library:
    """A model library's dlopen handle. It is closed once its model is gone and every
    context and output the library must release has been (``own`` counts them): cffi itself
    keeps every library an FFI opened for the life of the FFI (one per prefix here, for
    good), so it is taken off that list. CUDA builds stay loaded: unloading one would run the
    CUDA runtime's teardown."""

    def __init__(self, ffi: cffi.FFI, path: str, prefix: str, keep_loaded: bool) -> None:
        self.ffi = ffi
        self.lib = ffi.dlopen(path)
        self.keep_loaded = keep_loaded
        self.model_gone = False
        self._pending: list[None] = []   # one entry per object not yet released (append/pop are atomic)
        self.release_context = _Release(self, getattr(self.lib, f"{prefix}_context_release"))
        self.free_output = _Release(self, getattr(self.lib, f"{prefix}_free"))
        if not keep_loaded:
            try:   # (cffi's own bookkeeping: a cffi that keeps it elsewhere keeps the library loaded)
                with ffi._lock:
                    ffi._libraries.remove(self.lib)
                    caches = ffi._function_caches
                    del caches[next(i for i, c in enumerate(caches) if c is self.lib.__dict__)]
            except (AttributeError, ValueError, StopIteration):
                self.keep_loaded = True
        _open_libraries.add(self)

    def own(self, pointer: Any, release: _Release) -> Any:
        """``pointer``, released with ``release`` when it is collected."""
        self._pending.append(None)
        return self.ffi.gc(pointer, release)

    def model_collected(self) -> None:
        self.model_gone = True
        self._close_if_unused()

    def _close_if_unused(self) -> None:
        if self.model_gone and not self._pending and not self.keep_loaded:
            lib = self.__dict__.pop("lib", None)   # (atomic: one caller closes it)
            if lib is not None:
                self.ffi.dlclose(lib)
                _open_libraries.discard(self)


class CompiledModel:
    """A loaded artifact. ``run`` is thread-safe: each concurrent call gets its own context."""

    def __init__(self, folder: str, manifest: dict[str, Any] | None = None,
                 custom_libraries: tuple[str, ...] = (), stream: int = 0, cuda_graph: bool = False,
                 spinning: bool = True) -> None:
        self.folder = folder
        self.manifest = manifest or read_manifest(folder)
        check_runs_here(folder, self.manifest)
        prefix = self.manifest["prefix"]
        self.ffi = _ffi(prefix)
        try:
            self._library = _Library(self.ffi, os.path.join(folder, self.manifest["library"]), prefix,
                                     keep_loaded=self.manifest.get("device") == "cuda")
            weakref.finalize(self, self._library.model_collected)
            self.lib = self._library.lib
            _pin_openmp_runtime()
            self._fn = self._functions(prefix)
        except AttributeError as e:
            raise ModelError(f"{folder!r} was built by another onnxc version ({e}); compile the model again") from e
        self._map_weights()
        self.inputs = self.manifest["inputs"]
        self.outputs = self.manifest["outputs"]
        self._in_dtypes = [dt.by_name(i["dtype"]) for i in self.inputs]
        self._out_dtypes = [dt.by_name(o["dtype"]) for o in self.outputs]
        self._in_kinds = [i.get("kind", "tensor") for i in self.inputs]
        self._out_kinds = [o.get("kind", "tensor") for o in self.outputs]
        self._out_ranks = [len(o["shape"]) if k in ("tensor", "map_sequence") else 0
                           for o, k in zip(self.outputs, self._out_kinds)]
        if any(k not in ("tensor", "map_sequence") for k in self._out_kinds):
            self._fn["seq_free"] = getattr(self.lib, f"{prefix}_seq_free")
        self.device_id = int(self.manifest.get("options", {}).get("cuda_device", 0))
        if self.manifest.get("device") == "cuda":   # device buffers (IOBinding with device_type "cuda")
            self._fn["inputs_on_device"] = getattr(self.lib, f"{prefix}_inputs_on_device")
            self._fn["device_free"] = getattr(self.lib, f"{prefix}_device_free")
            self._fn["set_stream"] = getattr(self.lib, f"{prefix}_set_stream")
            self._fn["enable_graph"] = getattr(self.lib, f"{prefix}_enable_graph")
        self._spinning = spinning   # onnxruntime's allow_spinning: the pool's threads spin while they wait
        self._stream = stream   # CUDA builds: the caller's stream for every context (0: their own)
        # CUDA builds: runs on device buffers captured as a CUDA graph once, then replayed
        self._cuda_graph = cuda_graph
        if cuda_graph and self.manifest.get("cuda_graph", "-"):
            raise RuntimeFailure("This session cannot use the CUDA Graph feature as requested by the user: "
                                 + self.manifest.get("cuda_graph", "not a CUDA build"))
        self._pool: list[Any] = []
        # Models whose inputs and outputs are all plain numeric tensors run through run_plain.
        self.plain = all(k == "tensor" for k in self._in_kinds + self._out_kinds) and \
            all(t is not dt.STRING for t in self._in_dtypes + self._out_dtypes)
        self._plain_pool: list[tuple[Any, ...]] = []
        self._out_np = [t.np for t in self._out_dtypes]
        self._out_items = [t.itemsize for t in self._out_dtypes]
        # (shape, numpy dtype) per output when every output's shape is static (run_plain)
        self._out_static = [(tuple(o["shape"]), t.np) for o, t in zip(self.outputs, self._out_dtypes)] \
            if self.plain and all(isinstance(d, int) for o in self.outputs for d in o["shape"]) else None
        self._prof_stride = 4 + int(self.manifest.get("profile_max_dims", 0))  # ONNXC_PROF_STRIDE
        self._uncleared = self.ffi.new_allocator(should_clear_after_alloc=False)
        self._custom = self._custom_table(custom_libraries)
        self._lock = threading.Lock()
        self._random = self._random_state(prefix) if self.manifest.get("random") else None

    def _random_state(self, prefix: str) -> tuple[int, Any]:
        """The seed of random operators without a seed attribute, and the run counter all
        contexts of this model share: runs are numbered in the order they start, whatever
        context (or pool) they take, so a session's stream advances on every run."""
        self._fn["set_random"] = getattr(self.lib, f"{prefix}_set_random")
        seed = environment.seed()
        if seed is None:   # fresh draws for each session
            seed = int.from_bytes(os.urandom(8), "little")
        return seed % 2**64, self.ffi.new("uint64_t *", 0)

    def _functions(self, prefix: str) -> dict[str, Any]:
        names = ("context_size", "context_init", "context_release", "run", "free", "error", "terminate",
                 "bind_outputs", "profile", "profile_count", "set_custom_ops", "set_spinning")
        return {name: getattr(self.lib, f"{prefix}_{name}") for name in names}

    def _device_free(self, ptr: int) -> None:
        """Releases device memory this model allocated for an output (the array over it holds the model)."""
        self._fn["device_free"](self.ffi.cast("void *", ptr))

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

    def _custom_table(self, libraries: tuple[str, ...]) -> Any:
        """The custom-op descriptions the generated code calls, from the registered libraries."""
        wanted = self.manifest.get("custom_ops") or []
        if not wanted:
            return None
        from . import custom_ops
        found: dict[tuple[str, str], int] = {}
        for path in list(libraries) + sorted({w["library"] for w in wanted}):
            if os.path.exists(path):
                for key, address in custom_ops.addresses(path).items():
                    found.setdefault(key, address)
        table = self.ffi.new("void *[]", len(wanted))
        for i, w in enumerate(wanted):
            address = found.get((w["domain"], w["name"]))
            if address is None:
                raise ModelError(f"custom operator {w['domain']}::{w['name']} is not provided by any registered "
                                 "custom-op library")
            table[i] = self.ffi.cast("void *", address)
        return table

    def _new_context(self) -> Any:
        # released even when made halfway (a failed init leaves nothing behind)
        ctx = self._library.own(self.ffi.new("char[]", self._fn["context_size"]()),
                                self._library.release_context)
        if self._fn["context_init"](ctx, self._weights_ptr, self._weights_size) != 0:
            raise RuntimeFailure(self.ffi.string(self._fn["error"](ctx)).decode(errors="replace"))
        if not self._spinning:
            self._fn["set_spinning"](ctx, 0)
        if self._custom is not None:
            self._fn["set_custom_ops"](ctx, self._custom, len(self.manifest["custom_ops"]))
        if self._random is not None:
            self._fn["set_random"](ctx, *self._random)
        if self._stream and self._fn["set_stream"](ctx, self.ffi.cast("void *", self._stream)) != 0 \
                or self._cuda_graph and self._fn["enable_graph"](ctx, 1) != 0:
            raise RuntimeFailure(self.ffi.string(self._fn["error"](ctx)).decode(errors="replace"))
        return ctx

    def _sequence(self, value: Any, kind: str, dtype: dt.DType, keep: list) -> Any:
        """A caller's list (or optional value) as a read-only ``onnxc_seq`` for the model."""
        ffi = self.ffi
        seq = ffi.new("onnxc_seq *")
        keep.append(seq)
        if value is None:
            seq.none = 1
            return seq
        items = [value] if kind == "optional" else list(value)
        if any(a.ndim > abi.SEQ_MAX_RANK for a in items):
            raise InvalidArgument(f"sequence elements may have at most {abi.SEQ_MAX_RANK} dims")
        seq.count = seq.cap = len(items)
        seq.itemsize = dtype.itemsize
        data = ffi.new("void *[]", max(len(items), 1))
        ranks = ffi.new("int32_t[]", [a.ndim for a in items] or [0])
        dims = ffi.new("int64_t[]", [d for a in items for d in list(a.shape) + [0] * (abi.SEQ_MAX_RANK - a.ndim)]
                       or [0])
        seq.ranks = ranks
        keep += [data, dims, ranks]
        for i, a in enumerate(items):
            buf = ffi.from_buffer(a) if a.nbytes else _EMPTY
            keep.append(buf)
            data[i] = buf
        seq.data, seq.dims = data, dims
        return seq

    def _map(self, entries: tuple[np.ndarray, np.ndarray], keep: list) -> Any:
        """A checked map feed (keys ascending, values: two arrays) as a read-only ``onnxc_map``."""
        ffi = self.ffi
        out = ffi.new("onnxc_map *")
        keep.append(out)
        out.count = len(entries[0])
        for field, array in zip(("keys", "values"), entries):
            if array.dtype == object:
                ptrs = self._strings_in(array, keep)
            else:
                ptrs = ffi.from_buffer(array) if array.nbytes else _EMPTY
                keep.append(ptrs)
            setattr(out, field, ptrs)
        return out

    def _from_sequence(self, ptr: Any, kind: str, dtype: dt.DType) -> Any:
        """Copies a sequence or optional output out of the model's memory, then frees it."""
        ffi = self.ffi
        seq = ffi.cast("onnxc_seq *", ptr)
        try:
            if seq.none:
                return None
            items = []
            for i in range(seq.count):
                shape = tuple(seq.dims[i * abi.SEQ_MAX_RANK + d] for d in range(seq.ranks[i]))
                n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                raw = bytes(ffi.buffer(seq.data[i], n)) if n else b""
                items.append(np.frombuffer(raw, dtype=dtype.np).reshape(shape).copy())
            if kind == "optional":
                return items[0] if items else None
            return items
        finally:
            self._fn["seq_free"](ptr)

    def _read_profile(self, ctx: Any, buf: Any, events: list) -> None:
        count = self._fn["profile_count"](ctx)
        self._fn["profile"](ctx, self.ffi.NULL, 0)
        stride = self._prof_stride
        kept = min(count, PROFILE_EVENTS)
        raw = np.frombuffer(self.ffi.buffer(buf, kept * stride * 8), dtype=np.int64).reshape(kept, stride)
        for e in raw.tolist():
            events.append((e[0], e[1], e[2], e[4:4 + e[3]]))
        if count > kept:
            events.append(("dropped", count - kept))

    def _strings_in(self, array: np.ndarray, keep: list) -> Any:
        """A string tensor as an array of pointers to NUL-terminated UTF-8 copies."""
        ffi = self.ffi
        ptrs = ffi.new("char *[]", max(array.size, 1))
        keep.append(ptrs)
        for j, x in enumerate(array.reshape(-1)):
            data = x.encode("utf-8") if isinstance(x, str) else bytes(x)
            if b"\0" in data:
                raise InvalidArgument("strings with NUL bytes are not supported")
            buf = ffi.new("char[]", data)
            keep.append(buf)
            ptrs[j] = buf
        return ptrs

    def _strings_out(self, ptr: Any, shape: tuple) -> np.ndarray:
        """A string output, copied out (its strings live in the model's memory until the next run)."""
        ffi = self.ffi
        try:
            n = int(np.prod(shape, dtype=np.int64))
            ptrs = ffi.cast("char **", ptr)
            out = np.empty(n, dtype=object)
            for j in range(n):
                out[j] = ffi.string(ptrs[j]).decode("utf-8", errors="replace")
            return out.reshape(shape)
        finally:
            self._fn["free"](ptr)

    def run_plain(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """``run`` for plain-tensor models with no watcher, profile or bound outputs, the
        arrays of the static input shapes: a call costs a few cffi conversions. The per-call
        cffi arrays live with the pooled context, and outputs of static shapes are numpy
        arrays made here and bound to the context once, so the model writes straight into them."""
        ffi = self.ffi
        try:
            slot = self._plain_pool.pop()  # list.pop and append are atomic: no lock needed
        except IndexError:
            slot = self._plain_slot(arrays)
        ctx, in_ptrs, in_shapes, out_ptrs, out_shapes, bound, _sizes, last = slot
        try:
            keep = [ffi.from_buffer(a) if a.nbytes else _EMPTY for a in arrays]
            for i, buf in enumerate(keep):
                in_ptrs[i] = buf
            if bound is not None:
                fresh, targets = self._plain_outputs(last)
                for i, buf in enumerate(targets):
                    bound[i] = buf
            rc = self._fn["run"](ctx, in_ptrs, in_shapes, out_ptrs, out_shapes)
            if rc != 0:
                msg = ffi.string(self._fn["error"](ctx)).decode(errors="replace")
                raise RuntimeFailure(f"running the model failed: {msg}")
            if bound is not None:
                for i, buf in enumerate(targets):
                    if out_ptrs[i] != buf:
                        break  # an empty output, or one the model did not write in place
                else:
                    return fresh
            results = []
            pos = 0
            for i, rank in enumerate(self._out_ranks):
                shape = tuple(out_shapes[pos:pos + rank])
                pos += rank
                if bound is not None and out_ptrs[i] == targets[i]:
                    results.append(fresh[i])
                    continue
                owned = self._library.own(out_ptrs[i], self._library.free_output)
                results.append(np.frombuffer(ffi.buffer(owned, math.prod(shape) * self._out_items[i]),
                                             dtype=self._out_np[i]).reshape(shape))
            return results
        finally:
            self._plain_pool.append(slot)

    def _plain_outputs(self, last: list[Any]) -> tuple[list[np.ndarray], list[Any]]:
        """The arrays run_plain has the model write its static-shaped outputs into, with their
        C pointers. An array a previous run of this slot returned is written again when
        nothing refers to it any more but the slot (no reference, view or weak reference
        left): a fresh array of megabytes costs a page fault per 4 KiB written (the 2 MB output
        of the YOLO-style detector: 2 ms), and writing one nobody can see changes nothing."""
        ffi = self.ffi
        fresh, targets = [], []
        for i, (shape, dtype) in enumerate(self._out_static):
            held = last[i]
            if held is not None and sys.getrefcount(held[0]) == held[2] and not weakref.getweakrefcount(held[0]):
                array, buf = held[0], held[1]
            else:
                array = np.empty(shape, dtype)
                buf = ffi.from_buffer(array, require_writable=True) if array.nbytes else ffi.NULL
                held = last[i] = [array, buf, 0]
                held[2] = sys.getrefcount(array) - 1   # its references once `fresh` is dropped again (no local)
            fresh.append(array)
            targets.append(buf)
        return fresh, targets

    def _plain_slot(self, arrays: list[np.ndarray]) -> tuple[Any, ...]:
        """A context for run_plain with its call arrays; the input shapes are those of
        ``arrays`` (run_plain takes the static shapes only), written once."""
        ffi = self.ffi
        ctx = self._new_context()
        in_ptrs = ffi.new("void *[]", max(len(arrays), 1))
        in_shapes = ffi.new("int64_t[]", [d for a in arrays for d in a.shape] or [0])
        out_ptrs = ffi.new("void *[]", max(len(self.outputs), 1))
        out_shapes = ffi.new("int64_t[]", max(sum(self._out_ranks), 1))
        bound = sizes = None
        if self._out_static is not None:  # bound for good: the slot keeps both arrays alive
            bound = ffi.new("void *[]", max(len(self.outputs), 1))
            sizes = ffi.new("int64_t[]", [math.prod(shape) * np.dtype(dtype).itemsize
                                          for shape, dtype in self._out_static] or [0])
            self._fn["bind_outputs"](ctx, bound, sizes, len(self.outputs))
        last = [None] * len(self.outputs)   # per output: [array, its C pointer, references when unused]
        return ctx, in_ptrs, in_shapes, out_ptrs, out_shapes, bound, sizes, last

    def run(self, arrays: list[Any], watcher: Any = None, events: list | None = None,
            out_buffers: list | None = None) -> list[Any]:
        """Run on contiguous arrays (lists for sequences) already checked against the inputs.

        ``watcher`` (a RunOptions) may ask the run to stop from another thread: it is told
        how to reach this run's context while the run lasts. With ``events`` (a profiling
        build), the node events of the run are appended to it: (id, start ns, end ns, dims).
        ``out_buffers``: per output a writable C-contiguous array or None; the model writes
        an output straight into its array when it fits (IOBinding.bind_output).

        CUDA builds also take device memory: inputs given as DeviceArrays are read in place;
        an output buffer may be a DeviceArray, or ON_DEVICE for an output the model leaves in
        new device memory, returned as a DeviceArray."""
        ffi = self.ffi
        with self._lock:
            ctx = self._pool.pop() if self._pool else None
        if ctx is None:
            ctx = self._new_context()
        stop = functools.partial(self._fn["terminate"], ctx)
        stop(0)
        if watcher is not None:
            watcher._attach(stop)
        try:
            in_ptrs = ffi.new("void *[]", max(len(arrays), 1))
            keep: list[Any] = []
            on_device = None
            for i, (a, kind) in enumerate(zip(arrays, self._in_kinds)):
                if isinstance(a, DeviceArray):
                    if on_device is None:
                        on_device = ffi.new("unsigned char[]", len(arrays))
                        keep.append(on_device)
                    on_device[i] = 1
                    in_ptrs[i] = ffi.cast("void *", a.ptr)
                    continue
                if kind == "map":
                    in_ptrs[i] = self._map(a, keep)
                    continue
                if kind != "tensor":
                    in_ptrs[i] = self._sequence(a, kind, self._in_dtypes[i], keep)
                    continue
                if self._in_dtypes[i] is dt.STRING:
                    in_ptrs[i] = self._strings_in(a, keep)
                    continue
                buf = ffi.from_buffer(a) if a.nbytes else _EMPTY
                keep.append(buf)
                in_ptrs[i] = buf
            dims = [d for a, kind in zip(arrays, self._in_kinds) if kind == "tensor" for d in a.shape]
            in_shapes = ffi.new("int64_t[]", dims or [0])
            out_ptrs = ffi.new("void *[]", max(len(self.outputs), 1))
            out_shapes = ffi.new("int64_t[]", max(sum(self._out_ranks), 1))
            prof = None
            if events is not None:
                cap = PROFILE_EVENTS
                # (not cleared: the run writes the events it reports, and clearing megabytes
                # before every run would flush the caches the profiled nodes then run from)
                prof = self._uncleared("int64_t[]", cap * self._prof_stride)
                self._fn["profile"](ctx, prof, cap)
            given = [None] * len(self.outputs)
            if out_buffers:
                bufs = ffi.new("void *[]", max(len(self.outputs), 1))
                sizes = ffi.new("int64_t[]", max(len(self.outputs), 1))
                for i, b in enumerate(out_buffers):
                    if b is ON_DEVICE:
                        bufs[i], sizes[i] = ffi.NULL, -1
                    elif b is not None and b.nbytes and self._out_kinds[i] == "tensor" and \
                            self._out_dtypes[i] is not dt.STRING:
                        given[i] = ffi.cast("void *", b.ptr) if isinstance(b, DeviceArray) \
                            else ffi.from_buffer(b, require_writable=True)
                        bufs[i], sizes[i] = given[i], b.nbytes
                keep += [bufs, sizes]
                self._fn["bind_outputs"](ctx, bufs, sizes, len(self.outputs))
            if on_device is not None:
                self._fn["inputs_on_device"](ctx, on_device, len(arrays))
            try:
                rc = self._fn["run"](ctx, in_ptrs, in_shapes, out_ptrs, out_shapes)
            finally:
                if out_buffers:
                    self._fn["bind_outputs"](ctx, ffi.NULL, ffi.NULL, 0)
                if on_device is not None:
                    self._fn["inputs_on_device"](ctx, ffi.NULL, 0)
            if prof is not None:
                self._read_profile(ctx, prof, events)
            if rc != 0:
                msg = ffi.string(self._fn["error"](ctx)).decode(errors="replace")
                raise RuntimeFailure(f"running the model failed: {msg}")
            results = []
            pos = 0
            for i, (dtype, rank) in enumerate(zip(self._out_dtypes, self._out_ranks)):
                if self._out_kinds[i] not in ("tensor", "map_sequence"):
                    results.append(self._from_sequence(out_ptrs[i], self._out_kinds[i], dtype))
                    continue
                shape = tuple(out_shapes[pos + j] for j in range(rank))
                pos += rank
                if dtype is dt.STRING:
                    results.append(self._strings_out(out_ptrs[i], shape))
                    continue
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if given[i] is not None and ffi.cast("void *", given[i]) == out_ptrs[i]:
                    # written in place: the caller's array is the result (no copy)
                    target = out_buffers[i]
                    if isinstance(target, DeviceArray):
                        results.append(target if target.shape == shape else target.prefix(shape))
                        continue
                    results.append(target if target.shape == shape else target.reshape(-1)[:nbytes // dtype.itemsize]
                                   .reshape(shape))
                    continue
                if out_buffers and out_buffers[i] is ON_DEVICE:   # new device memory, now the caller's
                    results.append(DeviceArray.adopt(shape, dtype.np, int(ffi.cast("uintptr_t", out_ptrs[i])),
                                                     self.device_id, self._device_free))
                    continue
                owned = self._library.own(out_ptrs[i], self._library.free_output)
                results.append(np.frombuffer(ffi.buffer(owned, nbytes), dtype=dtype.np).reshape(shape))
                if self._out_kinds[i] == "map_sequence":  # ZipMap: one {label: score} per row,
                    keys = self.outputs[i]["keys"]         # keys sorted as onnxruntime's maps are
                    order = sorted(range(len(keys)), key=keys.__getitem__)
                    results[-1] = [{keys[j]: row[j] for j in order} for row in results[-1].tolist()]
            return results
        finally:
            if watcher is not None:
                watcher._detach(stop)
            stop(0)
            with self._lock:
                self._pool.append(ctx)
