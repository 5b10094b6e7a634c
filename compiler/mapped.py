"""Big initializers read in place: a model file's weights mapped, not copied.

Loading a model the usual way reads the file (one copy), parses it (protobuf copies every
tensor's bytes into its own memory: a second) and reads each initializer's ``raw_data`` (a
third, as a Python bytes object). For a model of 500 MB that is 1.5 GB of fresh memory, which
the operating system must find and clear: a second or more of a compile, and the peak resident
size of it.

So the frontend reads the protobuf wire format of a model file once, just far enough to find
the main graph's big initializers (``raw_data`` of at least ``MAPPED_BYTES`` bytes, of a plain
numeric type), and parses the model without those bytes. Each such initializer stays in the
ModelProto as a tensor with external data: its ``location`` is the model file itself (an
absolute path, with the file's identity remembered here), ``offset`` and ``length`` where its
bytes are in it. The graph's array of it is a read-only view of the file, mapped
(``array``); ``with_data`` gives the model with the bytes in it again, for the few places that
serialize it. A model the scan does not understand (anything unusual in the wire format) is
parsed as before, whole.

Only tensors this module marked are read this way: a model's own external data is checked and
read by the frontend as always, and a tensor that merely claims to be one of these (the key,
the location of a file not mapped here, or a file that changed since) is refused.
"""
from __future__ import annotations

import math
import mmap
import os
import sys
import threading
import weakref
from typing import Iterator, Optional

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from .errors import ModelError

# Initializers of raw data of at least this many bytes are mapped rather than copied.
MAPPED_BYTES = 1 << 20

# The element types whose raw data is the array as it is (numpy_helper.to_array converts the others).
_DTYPES = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.FLOAT16: np.float16,
           TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8, TensorProto.INT16: np.int16,
           TensorProto.UINT16: np.uint16, TensorProto.INT32: np.int32, TensorProto.UINT32: np.uint32,
           TensorProto.INT64: np.int64, TensorProto.UINT64: np.uint64}

# The key that marks a tensor as one of these, among its external data entries.
KEY = "onnxc.mapped"

# The files whose tensors were marked (model files, and the external data files they name):
# absolute path -> (size, mtime in ns, inode) when the model was loaded.
_files: dict[str, tuple[int, int, int]] = {}
# Their mappings, while an array views them: (path, identity) -> the whole file, read-only.
_maps: "weakref.WeakValueDictionary[tuple[str, tuple[int, int, int]], mmap.mmap]" = weakref.WeakValueDictionary()
_lock = threading.Lock()

# TensorProto's fields (onnx.proto): the ones whose presence beside raw_data makes a tensor unusual.
_DATA_TYPE, _SEGMENT, _RAW_DATA, _EXTERNAL_DATA, _DATA_LOCATION = 2, 3, 9, 13, 14
_TYPED_DATA = {4, 5, 6, 7, 10, 11}
_GRAPH, _INITIALIZER = 7, 5   # ModelProto.graph, GraphProto.initializer


class _Malformed(Exception):
    pass


def load(path: str) -> Optional[onnx.ModelProto]:
    """The model in file ``path`` with its big initializers marked and not read, or None where
    none is big, the host is big-endian or the wire format is anything but plain (the caller
    then parses the file as usual)."""
    if sys.byteorder != "little":
        return None
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size < MAPPED_BYTES:
            return None
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
    with buf:
        try:
            found = _scan(buf)
        except _Malformed:
            return None
    if found is None:
        return None
    skeleton, spans = found
    try:
        model = onnx.load_model_from_string(skeleton)
    except DecodeError:
        return None   # (parsed whole by the caller, which reports what is wrong)
    if any(onnx.external_data_helper.uses_external_data(t) or any(e.key == KEY for e in t.external_data)
           for t in onnx.external_data_helper._get_all_tensors(model)):
        return None   # (a model with external data of its own, or claims to the mark: read as before)
    tensors = model.graph.initializer
    _register(path, st)
    for index, offset, length in spans:
        _mark(tensors[index], path, offset, length)
    return model


def _register(path: str, st: os.stat_result) -> None:
    with _lock:
        _files[path] = (st.st_size, st.st_mtime_ns, st.st_ino)


def _mark(tensor: TensorProto, path: str, offset: int, length: int) -> None:
    """``tensor``'s data: ``length`` bytes at ``offset`` of the registered file ``path``."""
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in (("location", path), ("offset", str(offset)), ("length", str(length)), (KEY, "1")):
        tensor.external_data.add(key=key, value=value)


def drop_claims(model: onnx.ModelProto) -> None:
    """Removes the mark from every tensor of a model as its file gave it (a file's claim to be
    read in place is no more than an unknown key of its external data)."""
    for tensor in onnx.external_data_helper._get_all_tensors(model):
        if any(e.key == KEY for e in tensor.external_data):
            kept = [(e.key, e.value) for e in tensor.external_data if e.key != KEY]
            del tensor.external_data[:]
            for key, value in kept:
                tensor.external_data.add(key=key, value=value)


def is_mapped(tensor: TensorProto) -> bool:
    """Whether ``tensor`` is marked as one of these (``array`` checks that the mark is true)."""
    return tensor.data_location == TensorProto.EXTERNAL and any(e.key == KEY for e in tensor.external_data)


def array(tensor: TensorProto) -> np.ndarray:
    """The marked ``tensor``'s array: a read-only view of its model file, mapped."""
    where = f"initializer {tensor.name!r}"
    entries = {e.key: e.value for e in tensor.external_data}
    path = entries.get("location", "")
    with _lock:
        identity = _files.get(path)
    if identity is None or tensor.data_type not in _DTYPES:
        raise ModelError(f"{where}: external data {path!r} is not a file onnxc has loaded a model's data from")
    dtype = np.dtype(_DTYPES[tensor.data_type])
    dims = tuple(tensor.dims)
    count = math.prod(dims)
    try:
        offset, length = int(entries["offset"]), int(entries["length"])
        if min(dims, default=0) < 0 or offset < 0 or offset + length > identity[0] or count * dtype.itemsize != length:
            raise ModelError(f"initializer {tensor.name!r} cannot be read: {length} bytes of raw data "
                             f"for shape {list(dims)} of {dtype}")
        if length == 0:
            return np.zeros(dims, dtype)
        buf = _mapping(path, identity, where)
    except ModelError:
        raise
    except (KeyError, ValueError, OSError) as e:
        raise ModelError(f"{where} cannot be read: {e}") from e
    # (the view keeps the file mapped; the mapping goes with the last array that views it)
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset).reshape(dims)


def _mapping(path: str, identity: tuple[int, int, int], where: str) -> mmap.mmap:
    """The file at ``path`` mapped read-only, once for all its tensors while any is alive (a
    mapping holds a file descriptor of its own), if it is still the file of ``identity``."""
    st = os.stat(path)
    if (st.st_size, st.st_mtime_ns, st.st_ino) != identity:
        raise ModelError(f"{where}: the file {path} changed after the model was loaded")
    with _lock:
        buf = _maps.get((path, identity))
    if buf is not None:
        return buf
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if (st.st_size, st.st_mtime_ns, st.st_ino) != identity:
            raise ModelError(f"{where}: the file {path} changed after the model was loaded")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with _lock:
        return _maps.setdefault((path, identity), buf)


def map_external(model: onnx.ModelProto, folder: str) -> None:
    """Marks the main graph's initializers whose external data (already checked: a file inside
    ``folder``) is at least MAPPED_BYTES of a plain numeric type, so that they are read in place
    too; the rest are read as usual."""
    if sys.byteorder != "little":
        return
    for tensor in model.graph.initializer:
        if not onnx.external_data_helper.uses_external_data(tensor) or tensor.data_type not in _DTYPES:
            continue
        info = onnx.external_data_helper.ExternalDataInfo(tensor)
        length = math.prod(tensor.dims) * np.dtype(_DTYPES[tensor.data_type]).itemsize
        if length < MAPPED_BYTES or (info.length is not None and info.length != length):
            continue   # (a length that disagrees: read as usual, which reports it)
        path = os.path.realpath(os.path.join(folder, info.location))
        _register(path, os.stat(path))
        _mark(tensor, path, info.offset or 0, length)


def with_data(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the bytes of its marked tensors in it (a copy where there are any), for
    serializing."""
    if not any(is_mapped(t) for t in model.graph.initializer):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        if is_mapped(tensor):
            data = array(tensor).tobytes()
            del tensor.external_data[:]
            tensor.data_location = TensorProto.DEFAULT
            tensor.raw_data = data
    return copy


def _scan(buf) -> Optional[tuple[bytes, list[tuple[int, int, int]]]]:
    """The serialized model ``buf`` without its main graph's big raw data, and where each was:
    (initializer index, offset, length); None if there is none."""
    graph = None
    for field, wire, tag, start, end in _fields(buf, 0, len(buf)):
        if field == _GRAPH:
            if wire != 2 or graph is not None:   # (a graph given twice is merged by protobuf: not plain)
                return None
            graph = (tag, start, end)
    if graph is None:
        return None
    graph_tag, graph_start, graph_end = graph
    pieces: list[bytes] = []
    spans = []
    cursor = graph_start
    index = 0
    for field, wire, tag, start, end in _fields(buf, graph_start, graph_end):
        if field != _INITIALIZER:
            continue
        if wire != 2:
            return None
        raw = _big_raw_data(buf, start, end)
        if raw is not None:
            raw_tag, raw_start, raw_end = raw
            tensor = buf[start:raw_tag] + buf[raw_end:end]
            pieces += [buf[cursor:tag], _length_delimited(_INITIALIZER, len(tensor)), tensor]
            cursor = end
            spans.append((index, raw_start, raw_end - raw_start))
        index += 1
    if not spans:
        return None
    pieces.append(buf[cursor:graph_end])
    graph_bytes = b"".join(pieces)
    return b"".join([buf[:graph_tag], _length_delimited(_GRAPH, len(graph_bytes)), graph_bytes,
                     buf[graph_end:]]), spans


def _big_raw_data(buf, start: int, end: int) -> Optional[tuple[int, int, int]]:
    """(tag, start, end) of the tensor message ``buf[start:end]``'s raw data if it is big, of a
    plain type and the tensor's only data."""
    raw = None
    data_type = None
    for field, wire, tag, value, after in _fields(buf, start, end):
        if field == _RAW_DATA:
            if wire != 2 or raw is not None:
                return None
            raw = (tag, value, after)
        elif field == _DATA_TYPE:
            if wire != 0 or data_type is not None:
                return None
            data_type, _ = _varint(buf, value, after)
        elif field in _TYPED_DATA or field in (_SEGMENT, _EXTERNAL_DATA, _DATA_LOCATION):
            return None
    if raw is None or data_type not in _DTYPES or raw[2] - raw[1] < MAPPED_BYTES:
        return None
    return raw


def _fields(buf, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of the message ``buf[start:end]``: (number, wire type, where its tag starts,
    where its value starts, where it ends)."""
    pos = start
    while pos < end:
        tag = pos
        key, pos = _varint(buf, pos, end)
        wire = key & 7
        value = pos
        if wire == 0:
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, value = _varint(buf, pos, end)
            pos = value + size
        else:   # (groups: not in ONNX's messages)
            raise _Malformed
        if pos > end or key >> 3 == 0:
            raise _Malformed
        yield key >> 3, wire, tag, value, pos


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _length_delimited(field: int, size: int) -> bytes:
    return _encode_varint(field << 3 | 2) + _encode_varint(size)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
