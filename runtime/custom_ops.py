"""Custom-op libraries (SessionOptions.register_custom_ops_library), ABI of
``templates/c/onnxc_custom_op.h``, which cffi reads too: read their operator descriptions for
the compiler and hand the descriptions' addresses to each run context."""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any

import cffi

from ..compiler.errors import ModelError


@dataclass(frozen=True)
class CustomOp:
    domain: str
    name: str
    since: int
    num_inputs: int
    num_outputs: int
    output_types: tuple[int, ...]
    output_ranks: tuple[int, ...]
    library: str


@functools.lru_cache(maxsize=None)
def _ffi() -> cffi.FFI:
    """onnxc_custom_op.h as cffi reads it: its comments and its preprocessor lines other than
    integer constants left out."""
    with open(header_path(), encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    ffi = cffi.FFI()
    ffi.cdef("\n".join(line for line in text.splitlines()
                       if not line.startswith("#") or re.fullmatch(r"#define \w+ \d+", line)))
    return ffi


@functools.lru_cache(maxsize=None)
def _open(path: str) -> Any:
    try:
        return _ffi().dlopen(path)
    except OSError as e:
        raise ModelError(f"cannot load the custom-op library {path!r}: {e}") from e


def _table(path: str) -> tuple[Any, int]:
    lib = _open(path)
    ffi = _ffi()
    count = ffi.new("int32_t *")
    try:
        table = lib.onnxc_custom_ops(lib.ONNXC_CUSTOM_OP_ABI, count)
    except AttributeError as e:
        raise ModelError(f"{path!r} does not export onnxc_custom_ops (see onnxc_custom_op.h)") from e
    if table == ffi.NULL:
        raise ModelError(f"{path!r} does not support custom-op ABI version {lib.ONNXC_CUSTOM_OP_ABI}")
    return table, int(count[0])


def describe(path: str) -> list[CustomOp]:
    """The operators a library provides."""
    path = os.path.abspath(path)
    ffi = _ffi()
    table, count = _table(path)
    ops = []
    for i in range(count):
        d = table[i]
        n_out = int(d.num_outputs)
        ops.append(CustomOp(ffi.string(d.domain).decode(), ffi.string(d.name).decode(), int(d.since_version),
                            int(d.num_inputs), n_out, tuple(int(d.output_types[k]) for k in range(n_out)),
                            tuple(int(d.output_ranks[k]) for k in range(n_out)), path))
    return ops


def addresses(path: str) -> dict[tuple[str, str], int]:
    """(domain, name) -> address of the description, for the generated code's table."""
    ffi = _ffi()
    table, count = _table(os.path.abspath(path))
    return {(ffi.string(table[i].domain).decode(), ffi.string(table[i].name).decode()):
            int(ffi.cast("uintptr_t", ffi.addressof(table[i]))) for i in range(count)}


def header_path() -> str:
    """onnxc_custom_op.h, to compile custom-op libraries against."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates", "c",
                        "onnxc_custom_op.h")
