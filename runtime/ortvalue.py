"""OrtValue and IOBinding, as onnxruntime's Python API has them, on CPU memory.

An OrtValue wraps a numpy array (no copy); an IOBinding keeps the inputs and outputs of
the next ``run_with_iobinding``. An output bound to a buffer (an array, an OrtValue or a
raw pointer with its type and shape) is written in place by the generated code.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import InvalidArgument

_CPU = ("cpu",)


def _check_device(device_type: str, device_id: int = 0) -> None:
    if str(device_type).lower() not in _CPU or int(device_id) != 0:
        raise InvalidArgument(f"device {device_type}:{device_id} is not available: onnxc runs on the CPU "
                              "(device 'cpu', id 0)")


def _numpy_type(element_type: Any) -> np.dtype:
    """numpy dtype from a numpy type, a dtype, or onnxruntime's 'tensor(float)' spelling."""
    if isinstance(element_type, str) and element_type.startswith("tensor("):
        return dt.by_name(element_type[len("tensor("):-1]).np
    return np.dtype(element_type)


class OrtValue:
    """A tensor on the CPU; ``numpy()`` returns the array itself (no copy)."""

    def __init__(self, array: Optional[np.ndarray]) -> None:
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        _check_device(device_type, device_id)
        array = np.asarray(numpy_obj)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return OrtValue(array)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any, device_type: str = "cpu",
                                     device_id: int = 0) -> "OrtValue":
        _check_device(device_type, device_id)
        return OrtValue(np.empty(tuple(int(d) for d in shape), dtype=_numpy_type(element_type)))

    def numpy(self) -> np.ndarray:
        if self._array is None:
            raise InvalidArgument("this OrtValue holds no tensor")
        return self._array

    def shape(self) -> list[int]:
        return list(self.numpy().shape)

    def data_type(self) -> str:
        return dt.from_numpy(self.numpy().dtype).type_string

    def element_type(self) -> type:
        return self.numpy().dtype.type

    def device_name(self) -> str:
        return "cpu"

    def is_tensor(self) -> bool:
        return isinstance(self._array, np.ndarray)

    def has_value(self) -> bool:
        return self._array is not None

    def data_ptr(self) -> int:
        return self.numpy().ctypes.data

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()})" if self._array is not None else "OrtValue(None)"


def _from_pointer(buffer_ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """An array over caller memory at ``buffer_ptr`` (kept alive by the caller, as in onnxruntime)."""
    dtype = _numpy_type(element_type)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_byte * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(tuple(shape))


class IOBinding:
    """Inputs and outputs bound to a session for ``run_with_iobinding``."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._inputs: dict[str, np.ndarray] = {}
        self._outputs: dict[str, Optional[np.ndarray]] = {}   # None: onnxc allocates it
        self._results: list[OrtValue] = []

    # --- inputs -------------------------------------------------------------------
    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: Sequence[int],
                   buffer_ptr: int) -> None:
        _check_device(device_type, device_id)
        self._inputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue.numpy()

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    # --- outputs ------------------------------------------------------------------
    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Optional[Sequence[int]] = None, buffer_ptr: Optional[int] = None) -> None:
        _check_device(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InvalidArgument("bind_output with a buffer needs its element_type and shape")
        self._outputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._outputs[name] = ortvalue.numpy()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()

    def synchronize_inputs(self) -> None:
        """Nothing to wait for on the CPU."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for on the CPU."""

    # --- results ------------------------------------------------------------------
    def get_outputs(self) -> list[OrtValue]:
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [v.numpy().copy() for v in self._results]

    def _run(self, run_options: Any = None) -> None:
        names = list(self._outputs) or [o.name for o in self._session.get_outputs()]
        buffers = {n: b for n, b in self._outputs.items() if b is not None}
        results = self._session._run_into(names, self._inputs, buffers, run_options)
        self._results = [OrtValue(r) for r in results]
