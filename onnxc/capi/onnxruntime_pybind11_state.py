"""onnxruntime's exception classes, one per ONNX Runtime status code, under the module path
onnxruntime's users import them from.

As in onnxruntime each derives from ``Exception`` alone. onnxc's own exceptions
(``compiler/errors.py``) derive from the one that names the same failure, so
``except Fail`` or ``except InvalidArgument`` written for onnxruntime catches them.
"""
from __future__ import annotations

__all__ = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
           "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail", "ModelLoadCanceled",
           "ModelRequiresCompilation", "NotFound", "DeviceReset"]


class Fail(Exception):
    """FAIL: a failure with no more specific status (e.g. a run stopped by ``RunOptions.terminate``)."""


class InvalidArgument(Exception):
    """INVALID_ARGUMENT: a bad feed, option or argument."""


class NoSuchFile(Exception):
    """NO_SUCHFILE: the model file does not exist."""


class NoModel(Exception):
    """NO_MODEL: no model was loaded."""


class EngineError(Exception):
    """ENGINE_ERROR: an internal error of the runtime."""


class RuntimeException(Exception):
    """RUNTIME_EXCEPTION: an error raised while a model runs."""


class InvalidProtobuf(Exception):
    """INVALID_PROTOBUF: the model bytes are not a parsable ModelProto."""


class ModelLoaded(Exception):
    """MODEL_LOADED: a model was already loaded."""


class NotImplemented(Exception):  # noqa: A001 - onnxruntime's name for the NOT_IMPLEMENTED status
    """NOT_IMPLEMENTED: the model needs something the runtime does not implement."""


class InvalidGraph(Exception):
    """INVALID_GRAPH: the model's graph is malformed or contradicts itself."""


class EPFail(Exception):
    """EP_FAIL: an execution provider failed."""


class ModelLoadCanceled(Exception):
    """MODEL_LOAD_CANCELED: loading was canceled (``SessionOptions.set_load_cancellation_flag``)."""


class ModelRequiresCompilation(Exception):
    """MODEL_REQUIRES_COMPILATION: the model must be compiled for an execution provider first."""


class NotFound(Exception):
    """NOT_FOUND: a named thing (e.g. a registered library) was not found."""


class DeviceReset(Exception):
    """DEVICE_RESET: the device was reset and its memory lost."""
