"""onnxc: an ahead-of-time compiler for ONNX models.

``onnxc.InferenceSession`` is a drop-in for onnxruntime's: it compiles the model
to C (or loads a compiled artifact from the cache) and runs it natively. The module
offers onnxruntime's module-level names too (``docs/onnxruntime-api.md`` lists each
with its status, ``python -m onnxc._api_diff`` checks the list).
"""
from __future__ import annotations

__version__ = "0.1.0"
version = __version__        # onnxruntime.version
package_name = "onnxc"       # onnxruntime.package_name

from . import capi
from ._as_onnxruntime import install_as_onnxruntime
from .compiler.errors import (CompileError, InvalidArgument, ModelError, ModelNotFound, ModelParseError, OnnxcError,
                              RuntimeFailure, ShapeError, UnsafeCacheError, UnsupportedError)
from .driver import CompileOptions, compile_model
from .runtime.environment import (disable_telemetry_events, enable_telemetry_events, get_build_info, get_device,
                                  get_version_string, has_collective_ops, preload_dlls, print_debug_info,
                                  set_default_logger_verbosity, set_seed)
from .runtime.ortvalue import IOBinding, OrtValue
from .runtime.options import Env, ExecutionMode, OrtLoggingLevel, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .runtime.session import (InferenceSession, ModelMetadata, NodeArg, get_all_providers, get_available_providers,
                              set_default_logger_severity)

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder",
    "NodeArg", "ModelMetadata",
    "get_available_providers", "get_all_providers", "compile_model", "CompileOptions",
    "OnnxcError", "ModelError", "ModelNotFound", "ModelParseError", "UnsupportedError", "ShapeError", "CompileError",
    "InvalidArgument", "RuntimeFailure", "UnsafeCacheError", "set_default_logger_severity",
    "set_default_logger_verbosity", "OrtValue", "IOBinding", "Env", "OrtLoggingLevel",
    "get_device", "set_seed", "get_version_string", "get_build_info", "has_collective_ops",
    "enable_telemetry_events", "disable_telemetry_events", "preload_dlls", "print_debug_info",
    "install_as_onnxruntime",
]
