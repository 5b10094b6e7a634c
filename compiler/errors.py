"""Exceptions raised by onnxc. Every user-facing failure is one of these.

Each also derives from the built-in exception code written for onnxruntime would catch:
a bad model or feed is a ValueError, an unsupported feature a NotImplementedError, a
failure of the toolchain or of a run a RuntimeError. And each derives from the
onnxruntime status exception that names the same failure
(``onnxc.capi.onnxruntime_pybind11_state``, as ``onnxruntime.capi.onnxruntime_pybind11_state``):
code that catches ``InvalidArgument``, ``NoSuchFile`` or ``Fail`` from onnxruntime catches
onnxc's errors unchanged.
"""
from __future__ import annotations

from ..capi import onnxruntime_pybind11_state as ort_status


class OnnxcError(Exception):
    """Base class of every error onnxc raises on purpose."""


class ModelError(OnnxcError, ort_status.InvalidGraph, ValueError):
    """The model is malformed or contradicts itself."""


class ModelNotFound(ModelError, ort_status.NoSuchFile, FileNotFoundError):
    """The model file does not exist."""


class ModelParseError(ModelError, ort_status.InvalidProtobuf):
    """The model bytes are not a ModelProto protobuf can read."""


class UnsupportedError(OnnxcError, ort_status.NotImplemented, NotImplementedError):
    """The model uses something onnxc cannot compile (an op, opset or type)."""


class RankKnownAtRunTime(UnsupportedError):
    """A value's rank depends on dims or values known only when the model runs (an If whose
    branches give different ranks, a Squeeze without axes of a symbolic dim, a Reshape to a
    shape of run-time length). A session compiles such a model once per input signature."""


class ShapeError(ModelError):
    """Shapes or types do not fit an operator's rules."""


class CompileError(OnnxcError, ort_status.Fail, RuntimeError):
    """The C toolchain failed on generated code (a bug in onnxc), or lacks a system library
    the model's operators link (named in the message)."""


class InvalidArgument(OnnxcError, ort_status.InvalidArgument, ValueError):
    """A feed or option passed at run time is wrong (like onnxruntime's INVALID_ARGUMENT)."""


class RuntimeFailure(OnnxcError, ort_status.RuntimeException, ort_status.Fail, RuntimeError):
    """The generated code reported an error while running (e.g. an index out of range), or the
    run was stopped. onnxruntime raises RuntimeException for the one and Fail for the other:
    either catches it."""


class UnsafeCacheError(OnnxcError, ort_status.Fail, PermissionError):
    """The compile cache folder is not private to the user: libraries loaded from it could be
    anyone's code."""
