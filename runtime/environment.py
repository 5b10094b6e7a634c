"""onnxruntime's module-level functions about the process: device, version, seed, logging
defaults, telemetry.

``set_seed`` keeps the seed here: a session made after it seeds its random operators that carry
no ``seed`` attribute (RandomNormal, RandomUniform, Multinomial ...) with it, as onnxruntime's
kernels read the seed set by ``onnxruntime.set_seed`` when they are made.
"""
from __future__ import annotations

import logging
import platform
import sys
from typing import Optional

from .. import __version__
from ..compiler.errors import InvalidArgument
from . import cuda

_seed: Optional[int] = None
_verbosity = 0


def get_device() -> str:
    """"GPU" where onnxc's CUDAExecutionProvider can run, else "CPU" (onnxruntime's answer for
    its CUDA and CPU builds)."""
    return "GPU" if cuda.usable() else "CPU"


def set_seed(seed: int) -> None:
    """The seed of random operators that carry no seed attribute (read with ``seed()``)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgument(f"set_seed takes an int, not {type(seed).__name__}")
    if not -2**63 <= seed < 2**64:
        raise InvalidArgument(f"seed {seed} does not fit 64 bits")
    global _seed
    _seed = seed


def seed() -> Optional[int]:
    """The seed last given to ``set_seed`` (None: never set)."""
    return _seed


def get_version_string() -> str:
    return __version__


def get_build_info() -> str:
    return (f"onnxc Build Info: version={__version__}, code generation=C99 per model "
            f"(CUDA C++ for CUDAExecutionProvider), python={platform.python_version()}")


def has_collective_ops() -> bool:
    """onnxc has no collective (multi-device communication) operators, like onnxruntime's
    builds without MPI/NCCL."""
    return False


def set_default_logger_verbosity(level: int) -> None:
    """onnxruntime's default verbosity of VERBOSE messages: at 1 and above a session logs its
    compile options at debug level, as ``SessionOptions.log_verbosity_level`` asks."""
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise InvalidArgument(f"verbosity must be an int >= 0, not {level!r}")
    global _verbosity
    _verbosity = level


def default_verbosity() -> int:
    return _verbosity


def enable_telemetry_events() -> None:
    """Nothing to enable: onnxc sends no telemetry."""


def disable_telemetry_events() -> None:
    """Nothing to disable: onnxc sends no telemetry."""


def preload_dlls(cuda: bool = True, cudnn: bool = True, msvc: bool = True, directory: Optional[str] = None) -> None:
    """Nothing to preload: a CUDA build links the CUDA runtime statically and uses no cuDNN."""


def print_debug_info() -> None:
    """What a bug report needs: versions, devices and providers."""
    from .session import get_available_providers
    print(f"onnxc {__version__} on Python {sys.version.split()[0]} ({platform.platform()})")
    print(f"device: {get_device()}; available providers: {get_available_providers()}")
    print(f"'onnxc' logger level: {logging.getLevelName(logging.getLogger('onnxc').getEffectiveLevel())}")
