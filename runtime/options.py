"""SessionOptions, RunOptions and GraphOptimizationLevel, named as in onnxruntime."""
from __future__ import annotations

import enum
import os
import threading
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ..compiler.errors import InvalidArgument


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


MARCH_KEY = "session.onnxc.march"
PRECISION_KEY = "session.onnxc.precision"
MIN_WORK_KEY = "session.onnxc.min_threaded_work"
MIN_WORK_ENV = "ONNXC_MIN_THREADED_WORK"   # the default of sessions that do not set the key

# Session config keys onnxruntime documents (onnxruntime_session_options_config_keys.h) with
# what onnxc does with them; any other key warns, as it would have no effect.
CONFIG_KEYS = {
    "session.load_model_format": "ONNX only (ORT format models are refused)",
    "session.save_model_format": "ONNX only",
    "session.disable_prepacking": "weights are laid out at compile time: nothing to prepack",
    "session.use_env_allocators": "the generated code allocates its own memory",
    "session.set_denormal_as_zero": "flush-to-zero and denormals-are-zero around each run",
    "session.disable_quant_qdq": "no QDQ fusion is done",
    "session.disable_double_qdq_remover": "no QDQ fusion is done",
    "session.enable_quant_qdq_cleanup": "no QDQ fusion is done",
    "session.disable_aot_function_inlining": "local functions are always inlined",
    "session.intra_op.allow_spinning": "'0': the pool's threads sleep as soon as they have no work, between "
                                       "nodes and after a run (the default: they spin, see docs/performance.md)",
    "session.inter_op.allow_spinning": "inter-op steps run on the one pool of each context, which "
                                       "session.intra_op.allow_spinning governs",
    "session.use_device_allocator_for_initializers": "weights are memory-mapped",
    "session.record_ep_graph_assignment_info": "records which nodes the CPU provider runs",
    "session.use_ort_model_bytes_directly": "model bytes are copied",
    "session.strict_shape_type_inference": "inference is always strict",
    "session.allow_released_opsets_only": "every opset the onnx package defines is accepted",
    "session.dynamic_block_base": "no thread pool",
    "session.intra_op_thread_affinities": "no thread pool",
    "session.force_spinning_stop": "no thread pool",
    "session.optimized_model_external_initializers_file_name": "the optimized model is written whole",
    "session.optimized_model_external_initializers_min_size_in_bytes": "the optimized model is written whole",
    "optimization.enable_gelu_approximation": "no approximation is introduced",
    "optimization.minimal_build_optimizations": "ONNX models only",
    "optimization.disable_specified_optimizers": "passes named here (comma separated) are skipped",
    "ep.context_enable": "no execution-provider context models",
    "mlas.enable_gemm_fastmath_arm64_bfloat16": "no effect on this target",
    # onnxc's own keys
    MARCH_KEY: "the CPU the code is compiled for: a -march value (x86-64-v3, x86-64-v4, skylake-avx512, "
               "...), 'native' (the default: this machine) or '' (portable C)",
    PRECISION_KEY: "'fp32' (the default) or 'bf16': float32 MatMul, Gemm and Conv multiply in bfloat16 with "
                   "float32 sums (CPUs with AVX512-BF16; refused elsewhere)",
    "session.onnxc.specialise_shapes": "a model with symbolic input dims (a free batch too) is also built for the input "
                                       "shapes it runs at: 'background' (the default), 'sync' or 'off'",
    MIN_WORK_KEY: "with several intra-op threads, a model whose run is less work than this (multiply-adds and "
                  "elements written, static shapes only; default 33554432) runs on the calling thread; '0': "
                  "always the threads",
}


class OrtLoggingLevel(enum.IntEnum):
    ORT_LOGGING_LEVEL_VERBOSE = 0
    ORT_LOGGING_LEVEL_INFO = 1
    ORT_LOGGING_LEVEL_WARNING = 2
    ORT_LOGGING_LEVEL_ERROR = 3
    ORT_LOGGING_LEVEL_FATAL = 4


class Env:
    """A logging identity shared by the sessions created with ``env=``: their default severity
    and log id (SessionOptions set explicitly still win)."""

    def __init__(self, log_severity_level: int = 2, log_id: str = "onnxc") -> None:
        if int(log_severity_level) not in range(5):
            raise InvalidArgument(f"log_severity_level must be 0 to 4, not {log_severity_level}")
        self.log_severity_level = int(log_severity_level)
        self.log_id = str(log_id)


def usable_cores() -> int:
    """The cores this process may run on: what thread counts of 0 mean, as in onnxruntime."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


class SessionOptions:
    """Options that change how a model is compiled and run. Unknown attributes are refused."""
    __slots__ = ("graph_optimization_level", "intra_op_num_threads", "inter_op_num_threads",
                 "execution_mode", "log_severity_level", "log_verbosity_level", "logid",
                 "enable_profiling", "profile_file_prefix", "optimized_model_filepath",
                 "enable_mem_pattern", "enable_mem_reuse", "enable_cpu_mem_arena",
                 "use_deterministic_compute", "execution_order", "_config", "_dim_overrides", "_initializers",
                 "_custom_libraries")

    def __init__(self) -> None:
        self.graph_optimization_level: GraphOptimizationLevel | int = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode: ExecutionMode | int = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_cpu_mem_arena = True
        self.use_deterministic_compute = False
        self.execution_order: ExecutionOrder | int = ExecutionOrder.DEFAULT
        self._config: dict[str, str] = {}
        self._dim_overrides: dict[tuple[str, str], int] = {}
        self._initializers: dict[str, Any] = {}
        self._custom_libraries: list[str] = []

    def add_session_config_entry(self, key: str, value: str) -> None:
        """As in onnxruntime; a key onnxruntime does not document warns (it would do nothing)."""
        key, value = str(key), str(value)
        if key not in CONFIG_KEYS:
            warnings.warn(f"session config entry {key!r} is not a known onnxruntime key; it has no effect",
                          stacklevel=2)
        if key == "session.load_model_format" and value.upper() != "ONNX":
            raise InvalidArgument(f"session.load_model_format={value!r}: onnxc loads ONNX models only")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"session config entry {key!r} is not set")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix the symbolic input dim named ``dim_name``: the code is compiled for that size."""
        if int(dim_value) < 0:
            raise InvalidArgument(f"free dimension {dim_name!r}: {dim_value} is negative")
        self._dim_overrides[("name", str(dim_name))] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Fix every input dim with this denotation (e.g. DATA_BATCH) to ``dim_value``."""
        if int(dim_value) < 0:
            raise InvalidArgument(f"free dimension {dim_denotation!r}: {dim_value} is negative")
        self._dim_overrides[("denotation", str(dim_denotation))] = int(dim_value)

    def register_custom_ops_library(self, library_path: str) -> None:
        """Use the operators of a custom-op library (the C ABI of onnxc_custom_op.h)."""
        path = os.path.abspath(os.fspath(library_path))
        if not os.path.isfile(path):
            raise InvalidArgument(f"custom-op library {library_path!r} not found")
        if path not in self._custom_libraries:
            self._custom_libraries.append(path)

    @property
    def custom_ops_libraries(self) -> list[str]:
        return list(self._custom_libraries)

    def add_initializer(self, name: str, val: Any) -> None:
        """Use ``val`` (an OrtValue or array) for the model's initializer ``name``: the code is
        compiled with that value (it is a constant of the compiled model, as onnxruntime folds it)."""
        array = val.numpy() if hasattr(val, "numpy") else val
        self._initializers[str(name)] = np.array(array, copy=True)

    def add_external_initializers(self, names: Sequence[str], values: Sequence[Any]) -> None:
        if len(names) != len(values):
            raise InvalidArgument(f"{len(names)} names but {len(values)} values")
        for name, val in zip(names, values):
            self.add_initializer(name, val)

    @property
    def initializers(self) -> dict:
        return dict(self._initializers)

    @property
    def free_dimension_overrides(self) -> dict:
        return dict(self._dim_overrides)


class RunOptions:
    """Per-run options. Setting ``terminate`` while runs with these options are in progress
    (from another thread) stops them at their next node with a RuntimeFailure."""
    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "run_tag", "only_execute_path_to_fetches",
                 "_terminate", "_active", "_lock", "_config")

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.only_execute_path_to_fetches = False
        self._terminate = False
        self._active: set = set()
        self._lock = threading.Lock()
        self._config: dict[str, Any] = {}

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value: bool) -> None:
        with self._lock:
            self._terminate = bool(value)
            for stop in self._active:
                stop(1 if value else 0)

    def _attach(self, stop: Callable[[int], object]) -> None:
        """A run with these options started: ``stop(flag)`` reaches it."""
        with self._lock:
            self._active.add(stop)
            if self._terminate:
                stop(1)

    def _detach(self, stop: Callable[[int], object]) -> None:
        with self._lock:
            self._active.discard(stop)

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        return self._config[key]
