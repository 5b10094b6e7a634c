"""OrtValue and IOBinding, as onnxruntime's Python API has them, on CPU and GPU memory.

An OrtValue wraps a numpy array (no copy), or on device ``"cuda"`` a DeviceArray in GPU
memory; an IOBinding keeps the inputs and outputs of the next ``run_with_iobinding``. An output
bound to a buffer (an array, an OrtValue or a raw pointer with its type and shape) is written in
place by the generated code. A CUDA session reads inputs bound in GPU memory in place and
leaves outputs bound to ``"cuda"`` there, so chained runs never leave the GPU.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import InvalidArgument
from . import device
from .device import ON_DEVICE, DeviceArray

def _on_gpu(device_type: str, device_id: int = 0) -> bool:
    """Whether a tensor on this device lives in GPU memory (False: the CPU's); raises
    InvalidArgument for a device this machine does not have."""
    kind = str(device_type).lower()
    if kind == "cuda":
        device.check_device(device_id)
        return True
    if kind != "cpu" or int(device_id) != 0:
        raise InvalidArgument(f"device {device_type}:{device_id} is not available: onnxc runs on device 'cpu' "
                              "(id 0) and, with a CUDA GPU, 'cuda'")
    return False


def _numpy_type(element_type: Any) -> np.dtype:
    """numpy dtype from a numpy type, a dtype, or onnxruntime's 'tensor(float)' spelling."""
    if isinstance(element_type, str) and element_type.startswith("tensor("):
        return dt.by_name(element_type[len("tensor("):-1]).np
    return np.dtype(element_type)


class OrtValue:
    """A tensor on the CPU, where ``numpy()`` returns the array itself (no copy), or in GPU
    memory (device ``"cuda"``), where ``numpy()`` returns a host copy."""

    def __init__(self, array: Optional[Any]) -> None:
        self._array = array          # a numpy array, a DeviceArray, or None

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        on_gpu = _on_gpu(device_type, device_id)
        array = np.asarray(numpy_obj)
        if on_gpu:
            return OrtValue(DeviceArray.from_host(array, int(device_id)))
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return OrtValue(array)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any, device_type: str = "cpu",
                                     device_id: int = 0) -> "OrtValue":
        shape = tuple(int(d) for d in shape)
        if _on_gpu(device_type, device_id):
            return OrtValue(DeviceArray.empty(shape, _numpy_type(element_type), int(device_id)))
        return OrtValue(np.empty(shape, dtype=_numpy_type(element_type)))

    def _tensor(self) -> Any:
        if self._array is None:
            raise InvalidArgument("this OrtValue holds no tensor")
        return self._array

    def numpy(self) -> np.ndarray:
        array = self._tensor()
        return array.numpy() if isinstance(array, DeviceArray) else array

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Writes ``np_arr`` (same shape and type) into this tensor's memory, on either device."""
        array = self._tensor()
        if isinstance(array, DeviceArray):
            array.copy_from(np.asarray(np_arr))
        else:
            array[...] = np_arr

    def shape(self) -> list[int]:
        return list(self._tensor().shape)

    def data_type(self) -> str:
        return dt.from_numpy(self._tensor().dtype).type_string

    def element_type(self) -> type:
        return self._tensor().dtype.type

    def device_name(self) -> str:
        return "cuda" if isinstance(self._array, DeviceArray) else "cpu"

    def is_tensor(self) -> bool:
        return isinstance(self._array, (np.ndarray, DeviceArray))

    def has_value(self) -> bool:
        return self._array is not None

    def data_ptr(self) -> int:
        array = self._tensor()
        return array.ptr if isinstance(array, DeviceArray) else array.ctypes.data

    def __repr__(self) -> str:
        if self._array is None:
            return "OrtValue(None)"
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device={self.device_name()})"


def _from_pointer(buffer_ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """An array over caller memory at ``buffer_ptr`` (kept alive by the caller, as in onnxruntime)."""
    dtype = _numpy_type(element_type)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_byte * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(memoryview(raw), dtype=dtype, count=count).reshape(tuple(shape))


class IOBinding:
    """Inputs and outputs bound to a session for ``run_with_iobinding``."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._inputs: dict[str, Any] = {}
        self._outputs: dict[str, Any] = {}   # None: onnxc allocates it on the CPU; ON_DEVICE: on the GPU
        self._results: list[OrtValue] = []

    # --- inputs -------------------------------------------------------------------
    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: Sequence[int],
                   buffer_ptr: int) -> None:
        if _on_gpu(device_type, device_id):   # GPU memory the caller owns (CuPy, PyTorch, pycuda ...)
            self._inputs[name] = DeviceArray(shape, _numpy_type(element_type), buffer_ptr, int(device_id))
            return
        self._inputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue._tensor()

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    # --- outputs ------------------------------------------------------------------
    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Optional[Sequence[int]] = None, buffer_ptr: Optional[int] = None) -> None:
        if buffer_ptr is None and str(device_type).lower() == "cuda" and not device.available():
            # as onnxruntime where no CUDA provider is in use: the output comes back in CPU memory
            self._outputs[name] = None
            return
        on_gpu = _on_gpu(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = ON_DEVICE if on_gpu else None
            return
        if element_type is None or shape is None:
            raise InvalidArgument("bind_output with a buffer needs its element_type and shape")
        self._outputs[name] = DeviceArray(shape, _numpy_type(element_type), buffer_ptr, int(device_id)) \
            if on_gpu else _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._outputs[name] = ortvalue._tensor()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: a run copies and reads its inputs in stream order."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: a run returns once its outputs are written, on either device."""

    # --- results ------------------------------------------------------------------
    def get_outputs(self) -> list[OrtValue]:
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [v.numpy().copy() if v.device_name() == "cpu" else v.numpy() for v in self._results]

    def _run(self, run_options: Any = None) -> None:
        names = list(self._outputs) or [o.name for o in self._session.get_outputs()]
        buffers = {n: b for n, b in self._outputs.items() if b is not None}
        results = self._session._run_into(names, self._inputs, buffers, run_options)
        for i, name in enumerate(names):   # bound to the GPU, computed on the CPU (a CPU session)
            if self._outputs.get(name) is ON_DEVICE and isinstance(results[i], np.ndarray):
                results[i] = DeviceArray.from_host(results[i])
        self._results = [OrtValue(r) for r in results]
