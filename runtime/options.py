"""SessionOptions, RunOptions and GraphOptimizationLevel, named as in onnxruntime."""
from __future__ import annotations

import enum
from typing import Any


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """Options that change how a model is compiled and run. Unknown attributes are refused."""
    __slots__ = ("graph_optimization_level", "intra_op_num_threads", "inter_op_num_threads",
                 "execution_mode", "log_severity_level", "log_verbosity_level", "logid",
                 "enable_profiling", "profile_file_prefix", "optimized_model_filepath",
                 "enable_mem_pattern", "enable_mem_reuse", "enable_cpu_mem_arena",
                 "use_deterministic_compute", "_config")

    def __init__(self) -> None:
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
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
        self._config: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        return self._config[key]


class RunOptions:
    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "run_tag", "terminate", "_config")

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self._config: dict[str, Any] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        return self._config[key]
