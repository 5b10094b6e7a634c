"""Exceptions raised by onnxc. Every user-facing failure is one of these.

Each also derives from the built-in exception code written for onnxruntime would catch:
a bad model or feed is a ValueError, an unsupported feature a NotImplementedError, a
failure of the toolchain or of a run a RuntimeError.
"""
from __future__ import annotations


class OnnxcError(Exception):
    """Base class of every error onnxc raises on purpose."""


class ModelError(OnnxcError, ValueError):
    """The model is malformed or contradicts itself."""


class UnsupportedError(OnnxcError, NotImplementedError):
    """The model uses something onnxc cannot compile (an op, opset or type)."""


class ShapeError(ModelError):
    """Shapes or types do not fit an operator's rules."""


class CompileError(OnnxcError, RuntimeError):
    """The C toolchain failed on generated code (a bug in onnxc)."""


class InvalidArgument(OnnxcError, ValueError):
    """A feed or option passed at run time is wrong (like onnxruntime's INVALID_ARGUMENT)."""


class RuntimeFailure(OnnxcError, RuntimeError):
    """The generated code reported an error while running (e.g. an index out of range)."""


class UnsafeCacheError(OnnxcError, PermissionError):
    """The compile cache folder is not private to the user: libraries loaded from it could be
    anyone's code."""
