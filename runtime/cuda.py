"""CUDAExecutionProvider: whether this machine can run onnxc's CUDA builds, for which GPU
architectures to build, and the provider options onnxruntime takes.

A session asks for it as onnxruntime's does (``providers=["CUDAExecutionProvider",
"CPUExecutionProvider"]``). Without a CUDA driver and GPU (or without nvcc to build for it)
the session warns and runs on the CPU, as onnxruntime does. ``ONNXC_CUDA_EMULATE=1`` builds
the CUDA source with the host compiler instead and runs it on the CPU with the CUDA runtime
emulated: that is how machines without a GPU test the CUDA build's code.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import warnings
from typing import Any, Sequence

CUDA = "CUDAExecutionProvider"
EMULATE_ENV = "ONNXC_CUDA_EMULATE"
DEFAULT_ARCHS = ("sm_80", "sm_90")

# onnxruntime's CUDA provider options: name -> type. Those onnxc honours are in HONOURED;
# the others are accepted and have no effect (say why in docs/cuda.md).
OPTIONS: dict[str, type] = {
    "device_id": int, "gpu_mem_limit": int, "arena_extend_strategy": str, "cudnn_conv_algo_search": str,
    "do_copy_in_default_stream": int, "cudnn_conv_use_max_workspace": int, "cudnn_conv1d_pad_to_nc1d": int,
    "enable_cuda_graph": int, "enable_skip_layer_norm_strict_mode": int, "prefer_nhwc": int, "use_tf32": int,
    "tunable_op_enable": int, "tunable_op_tuning_enable": int, "tunable_op_max_tuning_duration_ms": int,
    "has_user_compute_stream": int, "user_compute_stream": str, "use_ep_level_unified_stream": int,
    "gpu_external_alloc": str, "gpu_external_free": str, "gpu_external_empty_cache": str,
    "sdpa_kernel": int, "fuse_conv_bias": int,
}
HONOURED = ("device_id", "gpu_mem_limit", "use_tf32", "has_user_compute_stream", "user_compute_stream",
            "enable_cuda_graph")
ARENA_STRATEGIES = ("kNextPowerOfTwo", "kSameAsRequested")


def emulated() -> bool:
    return os.environ.get(EMULATE_ENV, "") == "1"


@functools.lru_cache(maxsize=None)
def _driver() -> Any:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.cuInit(0) == 0:
            return lib
    return None


def device_count() -> int:
    """CUDA GPUs the driver sees (0 without a driver)."""
    lib = _driver()
    if lib is None:
        return 0
    count = ctypes.c_int(0)
    return count.value if lib.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0


def usable() -> bool:
    """Whether a session can run CUDA builds here: a GPU, its driver and nvcc; or emulation."""
    if emulated():
        return True
    from ..codegen.toolchain import _nvcc
    nvcc = _nvcc()
    return device_count() > 0 and (os.path.isfile(nvcc) or shutil.which(nvcc) is not None)


def runs_prebuilt() -> bool:
    """Whether a CUDA build made elsewhere (``onnxc compile --target cuda``) can run here: a GPU
    and its driver, no nvcc needed; or emulation, for an emulated build."""
    return emulated() or device_count() > 0


def _arch_version(arch: str) -> tuple[int, int, str]:
    match = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", arch)
    if match is None:
        raise ValueError(f"{arch!r} is not a GPU architecture (sm_80, sm_90, sm_90a ...)")
    return int(match.group(1)), int(match.group(2)), match.group(3)


def check_archs(names: Sequence[str]) -> tuple[str, ...]:
    """GPU architectures as nvcc names them (sm_80, sm_90 ...), checked; ValueError otherwise."""
    for name in names:
        _arch_version(name)
    if not names:
        raise ValueError("no GPU architecture given")
    return tuple(names)


def newest_arch(names: Sequence[str]) -> str:
    """The architecture whose PTX a build carries besides each one's machine code."""
    return max(names, key=_arch_version)


def covers(built: Sequence[str], device: str) -> bool:
    """Whether a build for the architectures ``built`` runs on a GPU of architecture ``device``:
    machine code of the same major version and no newer minor one (an ``a`` architecture's only
    on that GPU), or the PTX of the newest, which the driver compiles for any GPU at least as new."""
    major, minor, suffix = _arch_version(device)
    for name in built:
        b_major, b_minor, b_suffix = _arch_version(name)
        if b_major == major and (b_minor == minor if b_suffix else b_minor <= minor):
            return True
    p_major, p_minor, p_suffix = _arch_version(newest_arch(built))
    return (p_major, p_minor) == (major, minor) if p_suffix else (p_major, p_minor) <= (major, minor)


def archs(device: int = 0) -> tuple[str, ...]:
    """The GPU architectures to build for: the device's own, or sm_80 and sm_90 without one."""
    lib = _driver()
    if lib is None or device >= device_count():
        return DEFAULT_ARCHS
    dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuDeviceGet(ctypes.byref(dev), device) != 0:
        return DEFAULT_ARCHS
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)   # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)   # ..._MINOR
    return (f"sm_{major.value}{minor.value}",) if major.value else DEFAULT_ARCHS


def parse_options(options: dict | None) -> dict[str, Any]:
    """Provider options as onnxruntime takes them (values may be strings): checked and typed;
    unknown names warn."""
    out: dict[str, Any] = {}
    for name, value in (options or {}).items():
        kind = OPTIONS.get(name)
        if kind is None:
            warnings.warn(f"CUDAExecutionProvider: unknown provider option {name!r} is ignored", stacklevel=4)
            continue
        try:
            out[name] = kind(value) if kind is not int else int(str(value), 0)
        except ValueError:
            from ..compiler.errors import InvalidArgument
            raise InvalidArgument(f"CUDAExecutionProvider option {name}={value!r}: expected {kind.__name__}") from None
    if out.get("device_id", 0) < 0:
        from ..compiler.errors import InvalidArgument
        raise InvalidArgument(f"CUDAExecutionProvider option device_id={out['device_id']}: must be >= 0")
    if "arena_extend_strategy" in out and out["arena_extend_strategy"] not in ARENA_STRATEGIES + ("0", "1"):
        from ..compiler.errors import InvalidArgument
        raise InvalidArgument(f"arena_extend_strategy {out['arena_extend_strategy']!r}: one of "
                              f"{', '.join(ARENA_STRATEGIES)}")
    return out
