"""InferenceSession: onnxruntime's Python API over a compiled model."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import re
import threading
import time
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from ..codegen.work import SERIAL_WORK
from ..compiler import dtypes as dt
from ..compiler.errors import CompileError, InvalidArgument, ModelError, RuntimeFailure, UnsupportedError
from ..driver import CompileOptions, compile_cached, optimize
from . import cache, cuda, environment
from .device import ON_DEVICE, DeviceArray
from .loader import CompiledModel, read_manifest
from .options import (MARCH_KEY, MIN_WORK_ENV, MIN_WORK_KEY, PRECISION_KEY, Env, ExecutionMode,
                      GraphOptimizationLevel, RunOptions, SessionOptions, usable_cores)
from .ortvalue import IOBinding, OrtValue
from .profiler import Profiler
from .specialise import SHAPES_ENV, SHAPES_KEY, SHAPES_MODES, ShapeTiers, SpecialisingModel, specialises_shapes

log = logging.getLogger("onnxc")

# onnxruntime severities (0 verbose, 1 info, 2 warning, 3 error, 4 fatal) as logging levels.
_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.CRITICAL}
_session_ids = itertools.count(1)


def set_default_logger_severity(level: int) -> None:
    """onnxruntime's default severity for onnxc's loggers (the ``onnxc`` logging hierarchy)."""
    if level not in _LEVELS:
        raise InvalidArgument(f"severity must be 0 to 4, not {level}")
    log.setLevel(_LEVELS[level])

CPU = "CPUExecutionProvider"
_KNOWN_PROVIDERS = ("CUDAExecutionProvider", CPU)


def get_available_providers() -> list[str]:
    return [cuda.CUDA, CPU] if cuda.usable() else [CPU]


def get_all_providers() -> list[str]:
    return list(_KNOWN_PROVIDERS)


@dataclasses.dataclass(frozen=True)
class NodeArg:
    name: str
    type: str
    shape: Optional[list[Any]]   # None where onnxruntime has none (sequences, optionals)

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


@dataclasses.dataclass(frozen=True)
class AssignedNode:
    name: str
    op_type: str
    domain: str


@dataclasses.dataclass(frozen=True)
class AssignedSubgraph:
    ep_name: str
    nodes: list

    def get_nodes(self) -> list[AssignedNode]:
        return list(self.nodes)


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    """What ``get_modelmeta()`` returns, with onnxruntime's field names."""
    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict


class InferenceSession:
    """Compile (or load from the cache) and run an ONNX model.

    ``path_or_bytes`` is a model file, serialized model bytes, an ``onnx.ModelProto``
    or an artifact folder written by ``onnxc compile``.
    """

    def __init__(self, path_or_bytes: Any, sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None, provider_options: Optional[Sequence[dict]] = None,
                 **kwargs: Any) -> None:
        init_start = time.monotonic_ns()
        self._sess_options = sess_options or SessionOptions()
        so = self._sess_options
        env = kwargs.pop("env", None)
        if env is not None and not isinstance(env, Env):
            raise InvalidArgument("env must be an onnxc.Env")
        logid = so.logid or (env.log_id if env is not None else "") or f"session{next(_session_ids)}"
        severity = so.log_severity_level if sess_options is not None or env is None else env.log_severity_level
        self._log = logging.getLogger(f"onnxc.session.{logid}")
        self._log.setLevel(_LEVELS.get(int(severity), logging.WARNING))
        self._disabled = _disabled_passes(kwargs.pop("disabled_optimizers", None) or (), self._sess_options)
        for name in kwargs:
            warnings.warn(f"InferenceSession: unknown keyword argument {name!r} is ignored", stacklevel=2)
        if int(so.execution_order) != 0:
            warnings.warn("execution_order: onnxc runs nodes in the graph's topological order (levels of "
                          "independent nodes together with ORT_PARALLEL); other orders are not offered", stacklevel=2)
        # (a CUDA build made by `onnxc compile --target cuda` runs wherever a GPU is, without nvcc)
        prebuilt = _is_cuda_artifact(path_or_bytes) and cuda.runs_prebuilt()
        self._asked_providers = bool(providers)
        self._providers, self._cuda = self._resolve_providers(providers, provider_options, prebuilt or None)
        self._model_path = path_or_bytes if isinstance(path_or_bytes, (str, os.PathLike)) else None
        self._source = path_or_bytes
        self._pruned: dict[tuple[str, ...], CompiledModel | SpecialisingModel] = {}
        self._load()
        folder = self._folder
        if self._sess_options.optimized_model_filepath:
            if self._model_path is not None and os.path.isdir(self._model_path):
                raise InvalidArgument("optimized_model_filepath needs an ONNX model, not a compiled artifact")
            self._save_optimized(path_or_bytes, self._sess_options.optimized_model_filepath)
        m = self._model.manifest
        self._inputs = [_node_arg(i) for i in m["inputs"]]
        self._outputs = [_node_arg(o) for o in m["outputs"]]
        self._input_index = {i.name: k for k, i in enumerate(self._inputs)}
        self._output_index = {o.name: k for k, o in enumerate(self._outputs)}
        self._log.info("session ready in %.1f ms: artifact %s, %d inputs, %d outputs",
                       (time.monotonic_ns() - init_start) / 1e6, folder, len(self._inputs), len(self._outputs))
        if "one_thread" in m:   # a multi-threaded build of a model too small to split (codegen/work.py)
            self._log.info("%s", m["one_thread"])
        if max(so.log_verbosity_level, environment.default_verbosity()) >= 1:
            self._log.debug("compile options: %s", self._model.manifest.get("options"))
        self._profiler: Optional[Profiler] = None
        # Inputs as (name, numpy dtype, shape) when the model takes plain tensors of static
        # shapes: then run() checks a feed in one pass (see _fast_feed).
        self._fast_inputs: Optional[list[tuple[str, np.dtype, tuple[int, ...]]]] = None
        self._fast_model: Optional[CompiledModel] = None
        if isinstance(self._model, CompiledModel) and self._model.plain \
                and all(all(isinstance(d, int) for d in i["shape"]) for i in self._model.inputs):
            self._fast_model = self._model
            self._fast_inputs = [(i["name"], dt.by_name(i["dtype"]).np, tuple(i["shape"])) for i in self._model.inputs]
        if self._sess_options.enable_profiling:
            if "profile_nodes" not in m:
                raise InvalidArgument("enable_profiling: this artifact was compiled without profiling "
                                      "(compile it with CompileOptions(profile=True))")
            self._profiler = Profiler(self._sess_options.profile_file_prefix, m["profile_nodes"])
            self._profiler.session_event("session_initialization", init_start, time.monotonic_ns())

    # --- construction ---------------------------------------------------------
    def _load(self) -> None:
        """Compile (or find in the cache) and load the model for the session's providers."""
        if self._cuda is not None and self._sess_options.enable_profiling:
            warnings.warn("CUDAExecutionProvider: profiling runs the model on CPUExecutionProvider", stacklevel=3)
            self._providers, self._cuda = [CPU], None
        path, source = self._model_path, self._source
        folder: Optional[str] = None
        if path is not None and os.path.isdir(path):
            folder = os.fspath(path)
            cache.verify_artifact(folder)   # a library that fails its checksum is never loaded
            if read_manifest(folder).get("device") == "cuda":
                folder, source = self._cuda_artifact(folder)
            else:
                folder = self._build_for_options(folder)
        if folder is None:
            try:
                folder = self._compile_cached(source, self._compile_options())
            except (UnsupportedError, CompileError) as e:
                if self._cuda is None:
                    raise
                # as onnxruntime places nodes no CUDA kernel takes on the CPU: here the whole model
                warnings.warn(f"CUDAExecutionProvider cannot run this model ({e}); it runs on "
                              "CPUExecutionProvider", stacklevel=3)
                self._log.warning("CUDA build refused, running on the CPU: %s", e)
                self._providers, self._cuda = [CPU], None
                folder = self._compile_cached(source, self._compile_options())
        self._model: CompiledModel | SpecialisingModel | ShapeTiers = self._open(folder)
        self._folder = folder
        self._tier_shapes()
        limit = (self._cuda or {}).get("gpu_mem_limit", 0)
        if self._cuda is not None and limit and isinstance(self._model, CompiledModel):
            need = int(self._model.manifest["arena_bytes"]) + os.path.getsize(os.path.join(folder, "weights.bin"))
            if need > limit:
                raise RuntimeFailure(f"CUDAExecutionProvider: the model needs {need} bytes of device memory "
                                     f"(arena and weights), over gpu_mem_limit {limit}")

    def _tier_shapes(self) -> None:
        """A model with symbolic input dims (a free batch too) gets builds for the input shapes it runs at
        (runtime/specialise.py, ShapeTiers): session.onnxc.specialise_shapes = background (the
        default, or the ONNXC_SPECIALISE_SHAPES environment variable's value), sync or off."""
        mode = self._sess_options._config.get(SHAPES_KEY, os.environ.get(SHAPES_ENV) or "background")
        if mode not in SHAPES_MODES:
            where = SHAPES_KEY if SHAPES_KEY in self._sess_options._config else SHAPES_ENV
            raise InvalidArgument(f"{where}={mode!r}: expected one of {', '.join(SHAPES_MODES)}")
        held = self._model_path is not None and os.path.isdir(self._model_path)
        if mode == "off" or held or self._cuda is not None or self._sess_options.enable_profiling \
                or not isinstance(self._model, CompiledModel) or not specialises_shapes(self._model.inputs):
            return
        source, names = self._source, [i["name"] for i in self._model.inputs]
        digest: list[str] = []

        def options(signature: tuple) -> CompileOptions:
            return dataclasses.replace(self._compile_options(), input_shapes=tuple(zip(names, signature)))

        def lookup(signature: tuple) -> Optional[str]:
            if not digest:
                digest.append(cache.model_digest(source))
            return _cached_build(digest[0], options(signature))

        def build(signature: tuple) -> str:
            folder, built = compile_cached(source, options(signature))
            if built:
                self._log.info("built the model for input shapes %s", list(signature))
            return folder
        self._model = ShapeTiers(self._model, build, lookup, self._open, self._log, mode)

    def _cuda_artifact(self, folder: str) -> tuple[Optional[str], Any]:
        """A CUDA build's folder (``onnxc compile --target cuda``, here or on another machine):
        ``(folder, None)`` to load it as built, without compiling, where it runs here; else
        ``(None, model)``: the model it holds, to compile for what runs here (the CPU, or this
        GPU where the build is for others) through the cache."""
        manifest = read_manifest(folder)
        specialise = bool(manifest.get("specialise"))   # (compiled per input signature, for the session)
        if self._cuda is None and not self._asked_providers and (cuda.usable() if specialise
                                                                 else cuda.runs_prebuilt()):
            self._providers, self._cuda = [cuda.CUDA, CPU], {}   # (a CUDA build runs on its provider)
        if specialise:
            return folder, None
        why = self._why_not_as_built(manifest) if self._cuda is not None else None
        if self._cuda is not None and why is None:
            return folder, None
        held = manifest.get("model")
        if not isinstance(held, str) or os.path.basename(held) != held:
            raise ModelError(f"{folder!r} is a CUDA build that holds no model to compile for "
                             f"{'this GPU' if self._cuda is not None else 'the CPU'}: compile the model again")
        model = os.path.join(folder, held)
        if cache.sha256_file(model) != manifest.get("model_file_sha256"):
            raise ModelError(f"{folder!r} is a damaged onnxc artifact ({held} does not match its checksum): "
                             "compile the model again")
        if why is not None:
            warnings.warn(f"{folder}: {why}: compiling the model it holds for this session's GPU", stacklevel=4)
        else:
            self._log.info("%s is a CUDA build and the session runs on the CPU: compiling the model it holds",
                           folder)
        return None, model

    def _why_not_as_built(self, manifest: dict[str, Any]) -> Optional[str]:
        """Why a CUDA build cannot run as built in this session (None: it can)."""
        built = manifest.get("options", {})
        if built.get("cuda_emulate"):
            return None if cuda.emulated() else "built for the emulated CUDA runtime (ONNXC_CUDA_EMULATE=1)"
        if cuda.emulated():
            return "built by nvcc, and this session emulates the CUDA runtime (ONNXC_CUDA_EMULATE=1)"
        asked = self._cuda or {}
        device = int(asked.get("device_id", built.get("cuda_device", 0)))
        if device != built.get("cuda_device", 0):
            return f"built for device {built.get('cuda_device', 0)}, not {device}"
        if "use_tf32" in asked and bool(asked["use_tf32"]) != bool(built.get("cuda_tf32", True)):
            return f"built with use_tf32={int(bool(built.get('cuda_tf32', True)))}"
        archs = tuple(built.get("cuda_archs") or ())
        gpu = cuda.archs(device)
        if device < cuda.device_count() and archs and not cuda.covers(archs, gpu[0]):
            return f"built for {', '.join(archs)}, and GPU {device} is {gpu[0]}"
        return None

    def _build_for_options(self, folder: str) -> str:
        """An artifact folder built with other options than the session's. Where the session
        asks for other values than the folder's (it sets them, not leaving the defaults), the
        cache's build of the same model with the session's options runs when there is one; else
        the folder runs as built, with one warning of what differs. Either way the session's
        options (get_session_options) say what runs."""
        manifest = read_manifest(folder)
        built = manifest.get("options")
        if not isinstance(built, dict) or manifest.get("specialise"):
            return folder
        options = self._compile_options()
        wanted = json.loads(options.key())
        differ = [name for name in DECIDING_OPTIONS if name in built and built[name] != wanted[name]]
        asked = [name for name in differ if name in _asked_options(self._sess_options, self._disabled)]
        digest = manifest.get("model_sha256")
        if asked and isinstance(digest, str):
            cached = _cached_build(digest, options)
            if cached is not None:
                self._log.info("%s was built with other options (%s): running the cache's build for the "
                               "session's", folder, ", ".join(asked))
                return cached
        if asked:
            what = "; ".join(f"{name} {built[name]!r}, not {wanted[name]!r}" for name in asked)
            if (folder, what) not in _warned:
                _warned.add((folder, what))
                warnings.warn(f"{folder} was built with other options than the session's ({what}) and the cache "
                              "has no build for the session's: it runs as built, and get_session_options() says "
                              "so (compile the model with the session's options, e.g. onnxc compile --threads N)",
                              stacklevel=4)
        if differ:
            self._sess_options = _as_built(self._sess_options, built)
        return folder

    def _open(self, folder: str) -> CompiledModel | SpecialisingModel:
        """Load an artifact: a compiled model, or a model compiled per input signature."""
        manifest = read_manifest(folder)
        if manifest.get("specialise"):
            self._log.info("values of run-time rank (%s): compiled per input signature", manifest["specialise"])
            return SpecialisingModel(folder, manifest, self._compile_cached, self._open)
        return CompiledModel(folder, manifest, custom_libraries=tuple(self._sess_options.custom_ops_libraries),
                             stream=self._user_stream(),
                             cuda_graph=bool((self._cuda or {}).get("enable_cuda_graph")),
                             spinning=self._sess_options._config.get("session.intra_op.allow_spinning") != "0")

    def _user_stream(self) -> int:
        """The CUDA stream runs go to: the caller's (has_user_compute_stream, user_compute_stream
        as onnxruntime takes it, an address), or 0 for one of each context's own."""
        opts = self._cuda or {}
        if not opts.get("has_user_compute_stream") or not opts.get("user_compute_stream"):
            return 0
        try:
            return int(str(opts["user_compute_stream"]), 0)
        except ValueError:
            raise InvalidArgument(f"user_compute_stream {opts['user_compute_stream']!r}: expected the stream's "
                                  "address") from None

    def _compile_options(self) -> CompileOptions:
        overrides = tuple(sorted((kind, key, size) for (kind, key), size
                                 in self._sess_options.free_dimension_overrides.items()))
        so = self._sess_options
        memory = "arena"
        if not so.enable_cpu_mem_arena or not so.enable_mem_pattern:
            memory = "heap"          # no pre-planned pattern: intermediates allocated per run
        elif not so.enable_mem_reuse:
            memory = "no_reuse"      # one arena, no buffer shares bytes with another
        inits = so.initializers
        digests = tuple(sorted((name, hashlib.sha256(np.ascontiguousarray(a).tobytes() + str(a.dtype).encode()
                                                     + str(a.shape).encode()).hexdigest())
                               for name, a in inits.items()))
        libraries = tuple((path, cache.sha256_file(path)) for path in so.custom_ops_libraries)
        options = CompileOptions(optimization_level=int(so.graph_optimization_level), disabled_passes=self._disabled,
                                 dim_overrides=overrides, profile=bool(so.enable_profiling), memory=memory,
                                 initializer_digests=digests, initializers=inits or None, custom_ops=libraries,
                                 threads=int(so.intra_op_num_threads) or usable_cores(),
                                 inter_threads=(int(so.inter_op_num_threads) or usable_cores())
                                 if int(so.execution_mode) == 1 else 0,
                                 min_threaded_work=min_threaded_work(so._config),
                                 denormal_as_zero=so._config.get("session.set_denormal_as_zero") == "1",
                                 march=_march(so._config.get(MARCH_KEY, "native")),
                                 precision=so._config.get(PRECISION_KEY, "fp32"))
        return dataclasses.replace(options, **self._cuda_compile_options())

    def _cuda_compile_options(self) -> dict[str, Any]:
        if self._cuda is None:
            return {}
        device = int(self._cuda.get("device_id", 0))
        return {"target": "cuda", "threads": 1, "inter_threads": 0, "profile": False, "cuda_device": device,
                "cuda_archs": cuda.archs(device), "cuda_emulate": cuda.emulated(),
                "cuda_tf32": bool(self._cuda.get("use_tf32", 1))}

    def _save_optimized(self, source: Any, path: str) -> None:
        """The graph after onnxc's passes, as an ONNX model onnxruntime can load."""
        import onnx

        from ..compiler.export import export_model
        graph = optimize(source, self._compile_options())
        onnx.save(export_model(graph), os.fspath(path))
        self._log.info("optimized model written to %s", path)

    def _compile_cached(self, source: Any, options: CompileOptions) -> str:
        """The artifact from the cache, compiled first if it is not there: then the log says so
        before anything else happens, and gives the stage times when the build is done."""
        from .._progress import CompileProgress
        progress = CompileProgress()
        name = os.path.basename(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "the model"

        def starting() -> None:
            self._log.warning("compiling %s (first load; cached afterwards)", name)
        folder, built = compile_cached(source, options, on_stage=progress, on_build=starting)
        if built:
            self._log.info("compiled %s in %.2fs; %s", name, progress.total(), progress.summary())
        return folder

    @staticmethod
    def _resolve_providers(providers: Optional[Sequence[Any]], provider_options: Optional[Sequence[dict]] = None,
                           cuda_runs: Optional[bool] = None) -> tuple[list[str], Optional[dict]]:
        """The providers that run the session, and the CUDA provider's options when it is one
        of them. As onnxruntime: a provider may come with its options as a (name, dict) pair or
        in ``provider_options``; one not available here warns, and the CPU provider runs.
        ``cuda_runs``: whether the CUDA provider is available (default: whether it can build here)."""
        if not providers:
            return [CPU], None
        names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
        given = [p[1] if isinstance(p, (tuple, list)) and len(p) > 1 else {} for p in providers]
        if provider_options is not None:
            if len(provider_options) != len(names):
                raise InvalidArgument("provider_options must have one dict per provider")
            given = [dict(o or {}) for o in provider_options]
        available = [cuda.CUDA, CPU] if cuda_runs else get_available_providers()
        for name in names:
            if name not in available:
                reason = " (no CUDA GPU, driver or nvcc on this machine)" if name == cuda.CUDA else ""
                warnings.warn(f"Specified provider '{name}' is not in available provider names."
                              f"Available providers: '{', '.join(available)}'{reason}", stacklevel=3)
        if cuda.CUDA in names and cuda.CUDA in available and names.index(cuda.CUDA) <= (
                names.index(CPU) if CPU in names else len(names)):
            return [cuda.CUDA, CPU], cuda.parse_options(given[names.index(cuda.CUDA)])
        return [CPU], None

    # --- introspection --------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return []

    def get_modelmeta(self) -> ModelMetadata:
        meta = self._model.manifest["meta"]
        return ModelMetadata(meta["producer_name"], meta["graph_name"], meta["domain"], meta["doc_string"],
                             meta["graph_description"], meta["model_version"], dict(meta["custom_metadata_map"]))

    def set_providers(self, providers: Optional[Sequence[Any]] = None,
                      provider_options: Optional[Sequence[dict]] = None) -> None:
        """As in onnxruntime: unknown providers warn; a change of device rebuilds the session's model."""
        before = (self._providers, self._cuda)
        prebuilt = _is_cuda_artifact(self._model_path) and cuda.runs_prebuilt()
        self._asked_providers = bool(providers)
        self._providers, self._cuda = self._resolve_providers(providers, provider_options, prebuilt or None)
        if (self._providers, self._cuda) != before:
            self._pruned.clear()
            self._load()

    def get_provider_graph_assignment_info(self) -> list["AssignedSubgraph"]:
        """Which nodes each provider runs (every node: the CPU provider), when the session config
        entry ``session.record_ep_graph_assignment_info`` is "1", as onnxruntime requires."""
        if self._sess_options._config.get("session.record_ep_graph_assignment_info") != "1":
            raise InvalidArgument("set the session config entry session.record_ep_graph_assignment_info to 1 "
                                  "to record provider assignments")
        nodes = [AssignedNode(n["name"], n["op"], n["domain"]) for n in self._model.manifest.get("nodes", [])]
        return [AssignedSubgraph(self._providers[0], nodes)]

    def get_providers(self) -> list[str]:
        return list(self._providers)

    def get_provider_options(self) -> dict[str, dict]:
        """Each provider's options as strings, as onnxruntime reports them."""
        out: dict[str, dict] = {p: {} for p in self._providers}
        if self._cuda is not None:
            out[cuda.CUDA] = {"device_id": "0", "gpu_mem_limit": str(2**64 - 1),
                              "arena_extend_strategy": "kNextPowerOfTwo",
                              **{k: str(v) for k, v in self._cuda.items()}}
        return out

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    # --- profiling ------------------------------------------------------------------
    def end_profiling(self) -> str:
        """Stop profiling and write the Chrome-trace JSON; its file name ("" if not profiling)."""
        if self._profiler is None or not self._profiler.enabled:
            return ""
        return self._profiler.end()

    def get_profiling_start_time_ns(self) -> int:
        return self._profiler.start_ns if self._profiler is not None else 0

    @property
    def artifact_dir(self) -> str:
        """The compiled artifact folder this session runs."""
        return self._folder

    # --- running ----------------------------------------------------------------------
    def run(self, output_names: Optional[Sequence[str]], input_feed: dict[str, Any],
            run_options: Optional[RunOptions] = None) -> list[np.ndarray]:
        if run_options is None and self._fast_model is not None and self._profiler is None \
                and not self._log.isEnabledFor(logging.DEBUG) \
                and (not output_names or all(n in self._output_index for n in output_names)):
            arrays = self._fast_feed(input_feed)
            if arrays is not None:
                results = self._fast_model.run_plain(arrays)
                return [results[self._output_index[n]] for n in output_names] if output_names else results
        arrays = self._check_feed(input_feed)
        if output_names:
            for name in output_names:
                if name not in self._output_index:
                    raise InvalidArgument(f"Invalid output name: {name}")
        if run_options is not None and run_options.terminate:
            raise RuntimeFailure("Exiting due to terminate flag being set to true.")
        run_start = time.monotonic_ns()
        if run_options is not None and run_options.only_execute_path_to_fetches and output_names \
                and set(output_names) != set(self._output_index) and self._profiler is None:
            return self._run_fetches(tuple(output_names), arrays, run_options)
        profiler = self._profiler
        if profiler is not None and profiler.enabled:
            events: list = []
            results = self._model.run(arrays, run_options, events)
            profiler.run_events(run_start, time.monotonic_ns(), events, run_options.run_tag if run_options else "")
        else:
            results = self._model.run(arrays, run_options)
        verbose = run_options is not None and int(run_options.log_severity_level) == 0
        if verbose or self._log.isEnabledFor(logging.DEBUG):
            # RunOptions.log_severity_level=0 asks for this run's verbose messages whatever the
            # session's level: the record goes straight to the handlers.
            tag = f" {run_options.run_tag!r}" if run_options is not None and run_options.run_tag else ""
            self._log.handle(self._log.makeRecord(self._log.name, logging.DEBUG, __file__, 0, "run%s took %.3f ms",
                                                  (tag, (time.monotonic_ns() - run_start) / 1e6), None))
        if not output_names:
            return results
        return [results[self._output_index[n]] for n in output_names]

    def _run_fetches(self, names: tuple[str, ...], arrays: list, run_options: RunOptions) -> list[Any]:
        """Only the nodes the requested outputs need run: a model compiled for those outputs."""
        key = tuple(sorted(set(names)))
        model = self._pruned.get(key)
        if model is None:
            if self._model_path is not None and os.path.isdir(self._model_path):
                raise InvalidArgument("only_execute_path_to_fetches needs the ONNX model, not a compiled artifact")
            options = dataclasses.replace(self._compile_options(), outputs=key)
            folder = self._compile_cached(self._source, options)
            model = self._open(folder)
            self._pruned[key] = model
        # the pruned model's inputs: those of the full model it still reads, in the same order
        wanted = {i["name"] for i in model.inputs}
        feed = [a for spec, a in zip(self._inputs, arrays) if spec.name in wanted]
        results = model.run(feed, run_options)
        by_name = {o["name"]: r for o, r in zip(model.outputs, results)}
        return [by_name[n] for n in names]

    def _run_into(self, output_names: Sequence[str], input_feed: dict[str, Any], buffers: dict[str, np.ndarray],
                  run_options: Optional[RunOptions] = None) -> list[Any]:
        """Run writing outputs into the caller's ``buffers`` (name -> array) where they fit."""
        for name in list(output_names) + list(buffers):
            if name not in self._output_index:
                raise InvalidArgument(f"Invalid output name: {name}")
        out_buffers: list[Any] = [None] * len(self._outputs)
        if self._cuda is None:   # a CPU session: device outputs are computed on the host, then copied
            buffers = {n: b for n, b in buffers.items() if b is not ON_DEVICE}
        for name, b in buffers.items():
            info = self._model.outputs[self._output_index[name]]
            if b is ON_DEVICE or isinstance(b, DeviceArray) and b.dtype == dt.by_name(info["dtype"]).np:
                out_buffers[self._output_index[name]] = b
                continue
            if b.dtype != dt.by_name(info["dtype"]).np or not b.flags.c_contiguous or not b.flags.writeable:
                raise InvalidArgument(f"output {name!r} is bound to a {b.dtype} buffer; it must be a writable, "
                                      f"contiguous {info['dtype']} buffer")
            out_buffers[self._output_index[name]] = b
        arrays = self._check_feed(input_feed)
        if run_options is not None and run_options.terminate:
            raise RuntimeFailure("Exiting due to terminate flag being set to true.")
        results = self._model.run(arrays, run_options, out_buffers=out_buffers)
        for name, b in buffers.items():  # an output computed elsewhere (e.g. by a Loop): copy it in
            r = results[self._output_index[name]]
            if b is ON_DEVICE or isinstance(r, DeviceArray) and r.ptr == getattr(b, "ptr", None):
                continue
            if isinstance(b, DeviceArray):
                if r.shape != b.shape:
                    raise InvalidArgument(f"output {name!r} has shape {list(r.shape)}; the bound buffer {list(b.shape)}")
                b.copy_from(r)
                results[self._output_index[name]] = b
                continue
            if r is not b and not (isinstance(r, np.ndarray) and r.base is b):
                if r.shape != b.shape:
                    raise InvalidArgument(f"output {name!r} has shape {list(r.shape)}; the bound buffer {list(b.shape)}")
                b[...] = r
                results[self._output_index[name]] = b
        return [results[self._output_index[n]] for n in output_names]

    # --- onnxruntime's other ways to run -----------------------------------------------
    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: Optional[RunOptions] = None) -> None:
        iobinding._run(run_options)

    def run_with_ort_values(self, output_names: Optional[Sequence[str]], input_dict_ort_values: dict[str, Any],
                            run_options: Optional[RunOptions] = None) -> list[OrtValue]:
        feed = {k: v._tensor() if isinstance(v, OrtValue) else v for k, v in input_dict_ort_values.items()}
        return [OrtValue(r) for r in self.run(output_names, feed, run_options)]

    def run_async(self, output_names: Optional[Sequence[str]], input_feed: dict[str, Any], callback: Any,
                  user_data: Any, run_options: Optional[RunOptions] = None) -> None:
        """Run on another thread, then ``callback(outputs, user_data, error_message)`` (as onnxruntime)."""
        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as e:  # noqa: BLE001 - handed to the callback, like onnxruntime
                callback([], user_data, str(e))
                return
            callback(outputs, user_data, "")
        threading.Thread(target=work, daemon=True).start()

    def _fast_feed(self, feed: dict[str, Any]) -> Optional[list[np.ndarray]]:
        """The feed's arrays when every input is exactly what the model takes (dtype, shape,
        contiguous): the common case needs no further checks. None: take the checked path."""
        fast_inputs = self._fast_inputs or []
        if type(feed) is not dict or len(feed) != len(fast_inputs):
            return None
        arrays = []
        for name, dtype, shape in fast_inputs:
            a = feed.get(name)
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
                return None
            arrays.append(a)
        return arrays

    def _check_feed(self, feed: dict[str, Any]) -> list[Any]:
        """The feed as the model's input list: host arrays, device arrays and containers."""
        if not isinstance(feed, dict):
            raise InvalidArgument("input_feed must be a dict of input name to numpy array")
        for name in feed:
            if name not in self._input_index:
                raise InvalidArgument(f"Invalid input name: {name}")
        missing = [i.name for i in self._inputs if i.name not in feed and not i.type.startswith("optional")]
        if missing:
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed ({list(feed)}).")
        arrays: list[Any] = []
        bound: dict[str, tuple[int, str, int]] = {}
        for spec, info in zip(self._inputs, self._model.inputs):
            value = feed.get(spec.name)
            expected = dt.by_name(info["dtype"])
            if info.get("kind") == "map":
                arrays.append(_map_feed(spec, info, value))
                continue
            if info.get("kind", "tensor") != "tensor":
                arrays.append(_container_feed(spec, info, value, expected))
                continue
            if isinstance(value, DeviceArray) and self._cuda is None:
                value = value.numpy()   # a CPU session reads a host copy
            array = value if isinstance(value, (np.ndarray, DeviceArray)) else _array_feed(spec, value, expected)
            if expected is dt.STRING and isinstance(array, np.ndarray) and array.dtype.kind in "USO":
                array = array.astype(object)
            if isinstance(array, np.ndarray) and array.dtype != expected.np \
                    and array.dtype.newbyteorder("=") == expected.np:
                array = array.astype(expected.np)   # byte-swapped (e.g. '>f4' from a file): onnxruntime takes it
            if array.dtype != expected.np:
                actual = _type_string(array.dtype)
                raise InvalidArgument(f"Unexpected input data type. Actual: ({actual}) , expected: "
                                      f"({expected.type_string})")
            if array.ndim != len(info["shape"]):
                raise InvalidArgument(f"Invalid rank for input: {spec.name} Got: {array.ndim} Expected: "
                                      f"{len(info['shape'])} Please fix either the inputs/outputs or the model.")
            bad = []
            for axis, (got, want) in enumerate(zip(array.shape, info["shape"])):
                if isinstance(want, int):
                    if got != want:
                        bad.append(f" index: {axis} Got: {got} Expected: {want}")
                elif want is not None:
                    seen = bound.get(want)
                    if seen is None:
                        bound[want] = (got, spec.name, axis)
                    elif seen[0] != got:
                        raise InvalidArgument(
                            f"Dimension '{want}' is {seen[0]} in input {seen[1]} (axis {seen[2]}) but {got} "
                            f"in input {spec.name} (axis {axis})")
            if bad:
                raise InvalidArgument(f"Got invalid dimensions for input: {spec.name} for the following "
                                      f"indices\n" + "\n".join(bad) + "\n Please fix either the inputs/outputs "
                                      "or the model.")
            arrays.append(array if isinstance(array, DeviceArray) else np.asarray(array, order="C"))
        return arrays


# onnxruntime optimizer names -> the onnxc pass that does that work.
_ORT_OPTIMIZERS = {
    "ConstantFolding": "fold_constants",
    "EliminateIdentity": "remove_identity_like",
    "EliminateDropout": "remove_identity_like",
    "ReshapeFusion": "remove_identity_like",
    "CastElimination": "remove_identity_like",
}


def _disabled_passes(names: Sequence[str], options: SessionOptions) -> tuple[str, ...]:
    """Passes to skip: onnxc pass names or onnxruntime optimizer names (the keyword argument
    ``disabled_optimizers`` and the ``optimization.disable_specified_optimizers`` entry)."""
    from ..compiler.passes.pipeline import LOWERINGS, PIPELINE
    entry = options._config.get("optimization.disable_specified_optimizers", "")
    wanted = list(names) + [n.strip() for n in entry.split(",") if n.strip()]
    ours = {name: level for name, _, level in PIPELINE} | LOWERINGS
    out = []
    for name in wanted:
        target = _ORT_OPTIMIZERS.get(name, name)
        if target not in ours:
            warnings.warn(f"optimizer {name!r} is not one onnxc has (its passes: {', '.join(ours)}); ignored",
                          stacklevel=3)
        elif ours[target] == 0:
            warnings.warn(f"pass {target!r} is needed to generate code and cannot be disabled", stacklevel=3)
        else:
            out.append(target)
    return tuple(sorted(set(out)))


_KIND_TYPE = {"sequence": "seq({})", "optional": "optional({})", "optional_sequence": "optional(seq({}))"}


def _node_arg(info: dict) -> NodeArg:
    text = dt.by_name(info["dtype"]).type_string
    kind = info.get("kind", "tensor")
    if kind == "map_sequence":
        return NodeArg(info["name"], f"seq(map({info['key_type']},tensor(float)))", [])
    if kind == "map":
        return NodeArg(info["name"], f"map({dt.by_name(info['key_dtype']).name},{text})", [])
    if kind != "tensor":
        return NodeArg(info["name"], _KIND_TYPE[kind].format(text), None)
    shape = info.get("shown_shape", info["shape"])
    return NodeArg(info["name"], text, None if shape is None else list(shape))


def _array_feed(spec: NodeArg, value: Any, expected: dt.DType) -> np.ndarray:
    """A tensor feed that is not an array. A list or tuple of numbers becomes an array of the
    input's type, as onnxruntime converts it; None is refused by name."""
    if value is None:
        raise InvalidArgument(f"Required input {spec.name!r} is None: give a numpy array")
    if isinstance(value, (list, tuple)) and expected.np.kind in "biuf":
        try:
            return np.array(value, dtype=expected.np)
        except (OverflowError, TypeError, ValueError) as e:
            raise InvalidArgument(f"input {spec.name!r}: the list is not a {expected.type_string} tensor ({e})") from None
    return np.asarray(value)


def _map_feed(spec: NodeArg, info: dict, value: Any) -> tuple[np.ndarray, np.ndarray]:
    """A map input is a dict; it goes to the model as its keys (ascending) and values."""
    if not isinstance(value, dict):
        raise InvalidArgument(f"input {spec.name!r} is {spec.type}: give a dict, not {type(value).__name__}")
    if not value:
        # (onnxruntime refuses an empty map too: its map operators cannot run on one)
        raise InvalidArgument(f"input {spec.name!r}: the map is empty")
    key_type, value_type = dt.by_name(info["key_dtype"]), dt.by_name(info["dtype"])
    string_keys = key_type is dt.STRING
    for key in value:
        if isinstance(key, str) != string_keys or isinstance(key, bool) or \
                not isinstance(key, (str, int, np.integer)):
            raise InvalidArgument(f"input {spec.name!r} is {spec.type}: key {key!r} is a {type(key).__name__}, "
                                  f"not {'a str' if string_keys else 'an int'}")
    keys = sorted(value)
    items = [value[key] for key in keys]
    try:
        if value_type is dt.STRING:
            if not all(isinstance(v, str) for v in items):
                raise TypeError("the values must be str")
            values = np.array(items, dtype=object)
        else:
            if any(isinstance(v, (str, bytes)) or np.ndim(v) != 0 for v in items):
                raise TypeError("the values must be numbers")
            values = np.array(items, dtype=value_type.np)
        key_array = np.array(keys, dtype=object if string_keys else np.int64)
    except (OverflowError, TypeError, ValueError) as e:
        raise InvalidArgument(f"input {spec.name!r} is {spec.type}: {e}") from None
    return key_array, values


def _container_feed(spec: NodeArg, info: dict, value: Any, expected: dt.DType) -> Any:
    """A sequence input is a list of arrays; an optional one is None or its value."""
    kind = info["kind"]
    if value is None:
        if kind.startswith("optional"):
            return None
        raise InvalidArgument(f"input {spec.name} is a sequence: give a list of arrays, not None")
    items = [value] if kind == "optional" else value
    if kind != "optional" and not isinstance(value, (list, tuple)):
        raise InvalidArgument(f"input {spec.name} is {spec.type}: give a list of numpy arrays")
    out = []
    for a in items:
        a = a if isinstance(a, np.ndarray) else np.asarray(a)
        if a.dtype != expected.np:
            raise InvalidArgument(f"Unexpected input data type for {spec.name}. Actual: ({_type_string(a.dtype)}) , "
                                  f"expected: ({expected.type_string})")
        out.append(np.asarray(a, order="C"))
    if len({a.ndim for a in out}) > 1:
        raise InvalidArgument(f"input {spec.name}: every tensor of a sequence must have the same rank")
    if info.get("shape") is not None and out and out[0].ndim != len(info["shape"]):
        raise InvalidArgument(f"Invalid rank for input: {spec.name} Got: {out[0].ndim} Expected: {len(info['shape'])}")
    return out[0] if kind == "optional" else out


def _type_string(dtype: np.dtype) -> str:
    try:
        return dt.from_numpy(dtype).type_string
    except Exception:
        return f"numpy {dtype}"


# The compile options that decide what an artifact runs as and that session options set: an
# artifact folder built with others runs as built, with a warning.
DECIDING_OPTIONS = ("threads", "inter_threads", "optimization_level", "disabled_passes", "dim_overrides",
                    "memory", "denormal_as_zero", "precision")
_warned: set[tuple[str, str]] = set()


def _is_cuda_artifact(path: Any) -> bool:
    """Whether ``path`` is an artifact folder of a CUDA build."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(os.path.join(path, "manifest.json")):
        return False
    try:
        return read_manifest(os.fspath(path)).get("device") == "cuda"
    except (OSError, ValueError, ModelError):
        return False


def _asked_options(so: SessionOptions, disabled: Sequence[str]) -> set[str]:
    """The deciding compile options a session sets to other values than its defaults."""
    default = SessionOptions()
    asked = {name for name, attrs in (("threads", ("intra_op_num_threads",)),
                                      ("inter_threads", ("inter_op_num_threads", "execution_mode")),
                                      ("optimization_level", ("graph_optimization_level",)),
                                      ("memory", ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse")),
                                      ("dim_overrides", ("_dim_overrides",)))
             if any(getattr(so, a) != getattr(default, a) for a in attrs)}
    if disabled:
        asked.add("disabled_passes")
    if "session.set_denormal_as_zero" in so._config:
        asked.add("denormal_as_zero")
    if PRECISION_KEY in so._config:
        asked.add("precision")
    return asked


def _as_built(so: SessionOptions, built: dict[str, Any]) -> SessionOptions:
    """A copy of ``so`` that says what an artifact built with ``built`` (its manifest's options) runs as."""
    copy = SessionOptions()
    for name in SessionOptions.__slots__:
        value = getattr(so, name)
        setattr(copy, name, value.copy() if isinstance(value, (dict, list)) else value)
    copy.intra_op_num_threads = int(built.get("threads", copy.intra_op_num_threads))
    inter = int(built.get("inter_threads", 0))
    copy.execution_mode = ExecutionMode.ORT_PARALLEL if inter > 0 else ExecutionMode.ORT_SEQUENTIAL
    if inter > 0:
        copy.inter_op_num_threads = inter
    level = int(built.get("optimization_level", int(copy.graph_optimization_level)))
    copy.graph_optimization_level = GraphOptimizationLevel(level) if level in (0, 1, 2, 99) else level
    memory = built.get("memory", "arena")
    copy.enable_mem_pattern = copy.enable_cpu_mem_arena = memory != "heap"
    copy.enable_mem_reuse = memory == "arena"
    copy._dim_overrides = {(kind, key): int(size) for kind, key, size in built.get("dim_overrides", ())}
    if built.get("denormal_as_zero"):
        copy._config["session.set_denormal_as_zero"] = "1"
    else:
        copy._config.pop("session.set_denormal_as_zero", None)
    if built.get("precision", "fp32") != "fp32":
        copy._config[PRECISION_KEY] = built["precision"]
    else:
        copy._config.pop(PRECISION_KEY, None)
    if built.get("min_threaded_work", SERIAL_WORK) != SERIAL_WORK:
        copy._config[MIN_WORK_KEY] = str(built["min_threaded_work"])
    else:
        copy._config.pop(MIN_WORK_KEY, None)
    return copy


def _cached_build(digest: str, options: CompileOptions) -> Optional[str]:
    """The cache's intact build of the model with this digest for ``options``, or None."""
    folder = os.path.join(cache.cache_root(), cache.artifact_key(digest, options.key(), options.toolchain().identity()))
    return folder if os.path.isdir(folder) and cache.is_intact(folder) else None


def min_threaded_work(config: dict) -> int:
    """The session.onnxc.min_threaded_work entry (else ONNXC_MIN_THREADED_WORK, else the
    default): a multi-threaded build of a model with less work a run runs on one thread."""
    value = config.get(MIN_WORK_KEY, os.environ.get(MIN_WORK_ENV) or str(SERIAL_WORK))
    if not re.fullmatch(r"[0-9]+", value):
        where = MIN_WORK_KEY if MIN_WORK_KEY in config else MIN_WORK_ENV
        raise InvalidArgument(f"{where}={value!r}: expected a count of multiply-adds and elements (0: always the threads)")
    return int(value)


def _march(value: str) -> str:
    """The session.onnxc.march entry: a -march value, "native" or "" (portable C)."""
    if not re.fullmatch(r"[A-Za-z0-9._+-]*", value):
        raise InvalidArgument(f"{MARCH_KEY}={value!r}: expected a -march value such as x86-64-v3, native, or ''")
    return value
