"""onnxc: an ahead-of-time compiler for ONNX models.

``onnxc.InferenceSession`` is a drop-in for onnxruntime's: it compiles the model
to C (or loads a compiled artifact from the cache) and runs it natively.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .compiler.errors import (CompileError, InvalidArgument, ModelError, OnnxcError, RuntimeFailure,
                              ShapeError, UnsafeCacheError, UnsupportedError)
from .driver import CompileOptions, compile_model
from .runtime.ortvalue import IOBinding, OrtValue
from .runtime.options import Env, ExecutionMode, OrtLoggingLevel, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .runtime.session import (InferenceSession, NodeArg, get_all_providers, get_available_providers,
                              set_default_logger_severity)

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
    "NodeArg",
    "get_available_providers", "get_all_providers", "compile_model", "CompileOptions",
    "OnnxcError", "ModelError", "UnsupportedError", "ShapeError", "CompileError", "InvalidArgument",
    "RuntimeFailure", "UnsafeCacheError", "set_default_logger_severity", "OrtValue", "IOBinding", "Env", "OrtLoggingLevel",
]
