"""Tensors in GPU memory, for ``OrtValue`` and ``IOBinding`` with ``device_type="cuda"``.

A :class:`DeviceArray` is a shape, a dtype and a device pointer, with the allocation that owns
the memory (or none, for memory the caller owns). Memory comes from the CUDA driver API, called
through ctypes: ``libcuda`` is on every machine that has an NVIDIA GPU, so device buffers need
no Python CUDA binding, no build and no toolkit. Allocations live in the device's primary
context, the one the CUDA runtime inside a compiled model uses, so a model reads and writes them
in place. (pycuda or cuda-python would add a dependency that builds against the driver for
these five calls; their pointers, and any object with ``__cuda_array_interface__`` such as a
CuPy array or a PyTorch CUDA tensor, bind as they are through ``bind_input``'s ``buffer_ptr``.)

Under ``ONNXC_CUDA_EMULATE=1`` (a CUDA build run on the CPU, for tests) device memory is host
memory, as it is for the emulated model.
"""
from __future__ import annotations

import ctypes
import math
import threading
from typing import Any, Optional, Sequence

import numpy as np

from ..compiler.errors import InvalidArgument, RuntimeFailure
from . import cuda


class _Driver:
    """The driver calls device buffers need, in the primary context of each device."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self._contexts: dict[int, ctypes.c_void_p] = {}
        self._lock = threading.Lock()
        u64, size = ctypes.c_uint64, ctypes.c_size_t
        for name, args in (("cuMemAlloc_v2", [ctypes.POINTER(u64), size]), ("cuMemFree_v2", [u64]),
                           ("cuMemcpyHtoD_v2", [u64, ctypes.c_void_p, size]),
                           ("cuMemcpyDtoH_v2", [ctypes.c_void_p, u64, size]),
                           ("cuMemcpyDtoD_v2", [u64, u64, size]),
                           ("cuDevicePrimaryCtxRetain", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]),
                           ("cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                           ("cuCtxSetCurrent", [ctypes.c_void_p])):
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeFailure(f"CUDA {what} failed (CUresult {status})")

    def use(self, device: int) -> None:
        """Makes ``device``'s primary context current on this thread."""
        with self._lock:
            context = self._contexts.get(device)
            if context is None:
                dev, context = ctypes.c_int(0), ctypes.c_void_p()
                self._check(self.lib.cuDeviceGet(ctypes.byref(dev), device), f"cuDeviceGet({device})")
                self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), dev), "retaining the context")
                self._contexts[device] = context
        self._check(self.lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")

    def alloc(self, device: int, nbytes: int) -> int:
        self.use(device)
        ptr = ctypes.c_uint64(0)
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), f"allocating {nbytes} bytes")
        return ptr.value

    def free(self, device: int, ptr: int) -> None:
        self.use(device)
        self.lib.cuMemFree_v2(ptr)

    def to_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self.use(device)
        self._check(self.lib.cuMemcpyHtoD_v2(dst, src, nbytes), "copying to the device")

    def to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self.use(device)
        self._check(self.lib.cuMemcpyDtoH_v2(dst, src, nbytes), "copying from the device")

    def on_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self.use(device)
        self._check(self.lib.cuMemcpyDtoD_v2(dst, src, nbytes), "copying on the device")


class _Emulated:
    """Device memory as host memory (ONNXC_CUDA_EMULATE): the emulated model reads it directly."""

    def __init__(self) -> None:
        self._blocks: dict[int, Any] = {}
        self._lock = threading.Lock()

    def alloc(self, device: int, nbytes: int) -> int:
        block = (ctypes.c_char * max(nbytes, 1))()
        ptr = ctypes.addressof(block)
        with self._lock:
            self._blocks[ptr] = block
        return ptr

    def free(self, device: int, ptr: int) -> None:
        with self._lock:
            self._blocks.pop(ptr, None)

    def to_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    to_host = on_device = to_device


_EMULATED = _Emulated()

# An output buffer that asks the model to leave the output in new device memory (IOBinding's
# bind_output(name, "cuda") without a buffer).
ON_DEVICE = object()


def memory() -> Any:
    """Where device memory comes from here: the driver, or host memory under emulation."""
    if cuda.emulated():
        return _EMULATED
    lib = cuda._driver()
    if lib is None:
        raise InvalidArgument("device 'cuda' is not available: no CUDA driver or GPU on this machine")
    return _driver_api(lib)


_DRIVERS: dict[Any, _Driver] = {}   # the driver library (a ctypes.CDLL) -> its calls


def _driver_api(lib: Any) -> _Driver:
    drv = _DRIVERS.get(lib)
    if drv is None:
        drv = _DRIVERS[lib] = _Driver(lib)
    return drv


def available() -> bool:
    """Whether GPU memory can be used here: a CUDA device, or emulation."""
    return cuda.emulated() or cuda.device_count() > 0


def check_device(device_id: int) -> int:
    """``device_id`` if a CUDA device of that number can be used here."""
    device_id = int(device_id)
    count = 1 if cuda.emulated() else cuda.device_count()
    if not 0 <= device_id < count:
        raise InvalidArgument(f"device cuda:{device_id} is not available"
                              + (f" ({count} CUDA device{'s' if count != 1 else ''})" if count else
                                 ": no CUDA GPU, driver or emulation on this machine"))
    return device_id


class _Allocation:
    """Device memory freed when the last array over it goes."""

    def __init__(self, device: int, nbytes: int, ptr: Optional[int] = None, free: Any = None) -> None:
        self.device = device
        self._memory = memory()
        self.ptr = self._memory.alloc(device, nbytes) if ptr is None else ptr
        self._free = free

    def __del__(self) -> None:
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            try:
                if self._free is not None:
                    self._free(ptr)
                else:
                    self._memory.free(self.device, ptr)
            except Exception:   # noqa: BLE001 - at interpreter exit the driver may be gone
                pass


class DeviceArray:
    """A C-contiguous tensor in the memory of CUDA device ``device_id``."""

    def __init__(self, shape: Sequence[int], dtype: Any, ptr: int, device_id: int = 0,
                 owner: Optional[_Allocation] = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ptr = int(ptr)
        self.device_id = int(device_id)
        self._owner = owner          # None: memory the caller owns and keeps alive

    # --- made from ... ----------------------------------------------------------------
    @classmethod
    def empty(cls, shape: Sequence[int], dtype: Any, device_id: int = 0) -> "DeviceArray":
        device_id = check_device(device_id)
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidArgument(f"negative dim in shape {list(shape)}")
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        owner = _Allocation(device_id, nbytes)
        return cls(shape, dtype, owner.ptr, device_id, owner)

    @classmethod
    def from_host(cls, array: np.ndarray, device_id: int = 0) -> "DeviceArray":
        array = np.ascontiguousarray(array)
        if array.dtype.hasobject:
            raise InvalidArgument("string tensors cannot be placed on the GPU")
        out = cls.empty(array.shape, array.dtype, device_id)
        if array.nbytes:
            memory().to_device(out.device_id, out.ptr, array.ctypes.data, array.nbytes)
        return out

    @classmethod
    def adopt(cls, shape: Sequence[int], dtype: Any, ptr: int, device_id: int, free: Any) -> "DeviceArray":
        """Device memory a model allocated, released by ``free(ptr)`` when no array refers to it."""
        return cls(shape, dtype, ptr, device_id, _Allocation(device_id, 0, ptr=ptr, free=free))

    # --- numpy's vocabulary -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def reshape(self, shape: Sequence[int]) -> "DeviceArray":
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != self.size:
            raise InvalidArgument(f"cannot reshape {list(self.shape)} to {list(shape)}")
        return DeviceArray(shape, self.dtype, self.ptr, self.device_id, self._owner)

    def prefix(self, shape: Sequence[int]) -> "DeviceArray":
        """The first elements of this buffer, as a tensor of ``shape`` (an output smaller than its buffer)."""
        if math.prod(shape) > self.size:
            raise InvalidArgument(f"shape {list(shape)} does not fit a buffer of {self.size} elements")
        return DeviceArray(shape, self.dtype, self.ptr, self.device_id, self._owner)

    def numpy(self) -> np.ndarray:
        """A host copy."""
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            memory().to_host(self.device_id, out.ctypes.data, self.ptr, out.nbytes)
        return out

    def copy_from(self, array: np.ndarray) -> None:
        """Writes a host array of this shape and dtype into the device memory."""
        array = np.ascontiguousarray(array, dtype=self.dtype)
        if array.shape != self.shape:
            raise InvalidArgument(f"shape {list(array.shape)} does not match {list(self.shape)}")
        if array.nbytes:
            memory().to_device(self.device_id, self.ptr, array.ctypes.data, array.nbytes)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None}

    def __repr__(self) -> str:
        return f"DeviceArray(cuda:{self.device_id}, {self.dtype}, shape={list(self.shape)})"
