"""onnxruntime's Python API beside onnxc's: every public name, with its status in onnxc.

``python -m onnxc._api_diff`` prints the differences; ``--write docs/onnxruntime-api.md``
writes the page from the two installed modules and the explanations kept here (``NOTES``);
``--check docs/onnxruntime-api.md`` exits 1 when the page is out of date or when a name
onnxruntime has is neither in onnxc nor explained in ``NOTES``. Explanations live in this
file so the page is never edited by hand and never goes stale.
"""
from __future__ import annotations

import __future__
import argparse
import dataclasses
import enum
import sys
import types
from typing import Any, Optional

# The classes compared member by member: (section, name in both modules).
CLASSES = ("InferenceSession", "SessionOptions", "RunOptions", "IOBinding", "OrtValue", "NodeArg", "ModelMetadata",
           "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder")
MODULE = "module"

# (section, name) -> what onnxc does with it. A name onnxc lacks needs an entry saying why; a
# name onnxc has may have one (what "done" means there, or a limit). The status is the text
# before the first colon: done, accepted (no effect), warns, or not provided.
NOTES: dict[tuple[str, str], str] = {
    # --- module ---------------------------------------------------------------------------------
    (MODULE, "InferenceSession"): "done: a model path, bytes, an `onnx.ModelProto`, or an artifact folder "
                                  "written by `onnxc compile`; the keyword `disabled_optimizers` takes onnxc "
                                  "pass names, `conv_winograd`, `conv_direct` or onnxruntime optimizer names (unknown names "
                                  "warn); other keyword arguments warn",
    (MODULE, "GraphOptimizationLevel"): "done, same names and values (but `ORT_ENABLE_LAYOUT`, below)",
    (MODULE, "get_available_providers"): "done: `CPUExecutionProvider`, and `CUDAExecutionProvider` where a GPU, "
                                         "its driver and nvcc are present (`docs/cuda.md`)",
    (MODULE, "get_all_providers"): "done: the providers onnxc has, `CUDAExecutionProvider` and "
                                   "`CPUExecutionProvider`",
    (MODULE, "get_device"): "done: `GPU` where `CUDAExecutionProvider` is available, else `CPU`",
    (MODULE, "set_seed"): "done: seeds the random operators without a `seed` attribute of the "
                          "sessions made after it (without it, each session draws a fresh seed)",
    (MODULE, "get_version_string"): "done: onnxc's version",
    (MODULE, "version"): "done: onnxc's version",
    (MODULE, "package_name"): "done: `onnxc`",
    (MODULE, "get_build_info"): "done: onnxc's version and how it builds models",
    (MODULE, "has_collective_ops"): "done: `False`, onnxc has no collective operators",
    (MODULE, "set_default_logger_severity"): "done: the level of the `onnxc` logging hierarchy",
    (MODULE, "set_default_logger_verbosity"): "done: at 1 and above sessions log their compile options at debug "
                                              "level",
    (MODULE, "enable_telemetry_events"): "done: nothing to enable, onnxc sends nothing",
    (MODULE, "disable_telemetry_events"): "done: nothing to disable, onnxc sends nothing",
    (MODULE, "preload_dlls"): "done: nothing to preload, a CUDA build links the CUDA runtime statically and "
                              "uses no cuDNN",
    (MODULE, "print_debug_info"): "done: versions, device and providers",
    (MODULE, "OrtValue"): "done on CPU memory and, with `CUDAExecutionProvider`, GPU memory (below, and "
                          "`docs/cuda.md`)",
    (MODULE, "IOBinding"): "done on CPU and GPU memory (below)",
    (MODULE, "capi"): "done: `onnxc.capi.onnxruntime_pybind11_state` holds onnxruntime's exception classes "
                      "(Exceptions, below)",
    (MODULE, "SessionIOBinding"): "not provided: the native class behind `IOBinding`; use `IOBinding`",
    (MODULE, "SparseTensor"): "not provided: onnxc's tensors are dense",
    (MODULE, "OrtSparseFormat"): "not provided: onnxc's tensors are dense",
    (MODULE, "OrtDevice"): "not provided: devices are named by string, `cpu` or `cuda` and an id, as "
                           "`OrtValue` and `IOBinding` take them",
    (MODULE, "OrtDeviceMemoryType"): "not provided: no `OrtDevice` (devices are `cpu` or `cuda` by name)",
    (MODULE, "OrtDeviceVendorId"): "not provided: no `OrtDevice` (devices are `cpu` or `cuda` by name)",
    (MODULE, "OrtMemType"): "not provided: no `OrtDevice` (devices are `cpu` or `cuda` by name)",
    (MODULE, "OrtMemoryInfo"): "not provided: no `OrtDevice` (devices are `cpu` or `cuda` by name)",
    (MODULE, "OrtMemoryInfoDeviceType"): "not provided: no `OrtDevice` (devices are `cpu` or `cuda` by name)",
    (MODULE, "OrtAllocatorType"): "not provided: the generated code plans its memory at compile time; there "
                                  "are no allocators to choose",
    (MODULE, "OrtArenaCfg"): "not provided: the arena is planned at compile time and never grows",
    (MODULE, "create_and_register_allocator"): "not provided: no shared allocators (memory is planned at "
                                               "compile time)",
    (MODULE, "create_and_register_allocator_v2"): "not provided: no shared allocators (memory is planned at "
                                                  "compile time)",
    (MODULE, "set_global_thread_pool_sizes"): "not provided: each session's threads come from its "
                                              "`SessionOptions` (a pool per session context in the generated code)",
    (MODULE, "set_default_logger_callback"): "not provided: onnxc logs through Python `logging`; add a handler "
                                             "to the `onnxc` logger",
    (MODULE, "copy_tensors"): "not provided: `OrtValue.update_inplace` and `numpy()` copy between devices",
    (MODULE, "cuda_version"): "not provided: a CUDA build uses the nvcc found when the session compiles",
    (MODULE, "get_ep_devices"): "not provided: providers are chosen by name (`providers=`), not by device "
                                "objects",
    (MODULE, "OrtEpDevice"): "not provided: providers are chosen by name, not by device objects",
    (MODULE, "OrtHardwareDevice"): "not provided: providers are chosen by name, not by device objects",
    (MODULE, "OrtHardwareDeviceType"): "not provided: providers are chosen by name, not by device objects",
    (MODULE, "OrtExecutionProviderDevicePolicy"): "not provided: providers are chosen by name, not by policy",
    (MODULE, "OrtSyncStream"): "not provided: a CUDA session takes the caller's stream as the provider option "
                               "`user_compute_stream` (`docs/cuda.md`)",
    (MODULE, "register_execution_provider_library"): "not provided: onnxc's providers are built in (CPU and "
                                                     "CUDA); custom operators come from "
                                                     "`register_custom_ops_library`",
    (MODULE, "unregister_execution_provider_library"): "not provided: no provider libraries to register",
    (MODULE, "OrtEpAssignedNode"): "not provided under this name: `get_provider_graph_assignment_info` returns "
                                   "objects with the same fields",
    (MODULE, "OrtEpAssignedSubgraph"): "not provided under this name: `get_provider_graph_assignment_info` "
                                       "returns objects with the same fields",
    (MODULE, "OrtEpContextData"): "not provided: onnxc's compiled form is its artifact folder, not an EP "
                                  "context model",
    (MODULE, "OrtEpContextDataBuffer"): "not provided: onnxc's compiled form is its artifact folder, not an EP "
                                        "context model",
    (MODULE, "OrtCompileApiFlags"): "not provided: `onnxc compile` (or `onnxc.compile_model`) writes a compiled "
                                    "artifact instead",
    (MODULE, "ModelCompiler"): "not provided: `onnxc compile` (or `onnxc.compile_model`) writes a compiled "
                               "artifact instead",
    (MODULE, "ModelPackage"): "not provided: `onnxc compile` writes an artifact folder that "
                              "`InferenceSession` loads",
    (MODULE, "ModelPackageComponentContext"): "not provided: no model packages (see `ModelPackage`)",
    (MODULE, "ModelPackageContext"): "not provided: no model packages (see `ModelPackage`)",
    (MODULE, "ModelPackageOptions"): "not provided: no model packages (see `ModelPackage`)",
    (MODULE, "ModelPackageWriteMode"): "not provided: no model packages (see `ModelPackage`)",
    (MODULE, "OrtExternalInitializerInfo"): "not provided: external data is read from files next to the model",
    (MODULE, "LoraAdapter"): "not provided: weights are compiled in; swap initializers with "
                             "`SessionOptions.add_initializer` (a new build)",
    (MODULE, "AdapterFormat"): "not provided: no LoRA adapters (see `LoraAdapter`)",
    (MODULE, "import_capi_exception"): "not provided: onnxruntime's record of a failed import of its native "
                                       "module",

    # --- InferenceSession -----------------------------------------------------------------------
    ("InferenceSession", "run"): "done, with onnxruntime's checks of names, types, ranks and dims",
    ("InferenceSession", "run_async"): "done: runs on another thread, then calls "
                                       "`callback(outputs, user_data, error)`",
    ("InferenceSession", "get_overridable_initializers"): "done: empty, initializers are compiled in",
    ("InferenceSession", "get_inputs"): "done: a dim the model leaves unnamed is `None`, as in onnxruntime",
    ("InferenceSession", "get_outputs"): "done: a dim the model leaves unnamed is `None`, as in onnxruntime",
    ("InferenceSession", "get_modelmeta"): "done: producer, graph name, description, domain, version, custom "
                                           "metadata",
    ("InferenceSession", "set_providers"): "done: an unavailable provider warns and the CPU provider runs",
    ("InferenceSession", "get_provider_graph_assignment_info"): "done with "
                                                                "`session.record_ep_graph_assignment_info=1`: the "
                                                                "whole graph on the session's provider",
    ("InferenceSession", "end_profiling"): "done: onnxruntime's Chrome-trace events, one per node call (CPU "
                                           "builds; a CUDA session asked to profile runs on the CPU, with a "
                                           "warning)",
    ("InferenceSession", "create_ortvalue_from_shape_and_type"): "not provided: use "
                                                                 "`OrtValue.ortvalue_from_shape_and_type`",
    ("InferenceSession", "disable_fallback"): "not provided: a model the CUDA build refuses runs on the CPU "
                                              "provider, with a warning",
    ("InferenceSession", "enable_fallback"): "not provided: a model the CUDA build refuses runs on the CPU "
                                             "provider, with a warning",
    ("InferenceSession", "get_input_epdevices"): "not provided: no device objects (see the module's "
                                                 "`OrtEpDevice`)",
    ("InferenceSession", "get_input_memory_infos"): "not provided: no `OrtMemoryInfo`; inputs are read where "
                                                    "they are bound",
    ("InferenceSession", "get_output_memory_infos"): "not provided: no `OrtMemoryInfo`; outputs go where they "
                                                     "are bound",
    ("InferenceSession", "get_tuning_results"): "not provided: no tunable kernels (TunableOp)",
    ("InferenceSession", "set_tuning_results"): "not provided: no tunable kernels (TunableOp)",
    ("InferenceSession", "release_captured_graph"): "not provided: a CUDA graph lives as long as its session",
    ("InferenceSession", "run_with_ortvaluevector"): "not provided: the native form of `run_with_ort_values`; "
                                                     "use that",
    ("InferenceSession", "set_ep_dynamic_options"): "not provided: provider options are fixed when the session "
                                                    "compiles",

    # --- SessionOptions -------------------------------------------------------------------------
    ("SessionOptions", "graph_optimization_level"): "done: selects the passes "
                                                    "(`compiler/passes/pipeline.py`); `ORT_DISABLE_ALL` runs only "
                                                    "what code generation needs",
    ("SessionOptions", "optimized_model_filepath"): "done: the optimized graph, bodies included, as an ONNX model "
                                                    "that onnxruntime loads with the same outputs",
    ("SessionOptions", "enable_profiling"): "done: the code is compiled with timing around every node call",
    ("SessionOptions", "log_severity_level"): "done through Python `logging` (logger `onnxc.session.<logid>`)",
    ("SessionOptions", "log_verbosity_level"): "done: at 1 and above the session logs its compile options",
    ("SessionOptions", "enable_mem_pattern"): "done: off means intermediates are allocated per run instead of in "
                                              "the planned arena",
    ("SessionOptions", "enable_cpu_mem_arena"): "done: off means intermediates are allocated per run instead of "
                                                "in the planned arena",
    ("SessionOptions", "enable_mem_reuse"): "done: off means the arena is planned without reuse (no two buffers "
                                            "share bytes)",
    ("SessionOptions", "add_session_config_entry"): "done: the documented keys are accepted (see "
                                                    "`runtime/options.py`); an unknown key warns; "
                                                    "`session.load_model_format` other than ONNX is refused; "
                                                    "onnxc's own: `session.onnxc.march` (the target CPU), "
                                                    "`session.onnxc.precision` (`bf16`: GEMMs and convolutions "
                                                    "in bfloat16, docs/performance.md), "
                                                    "`session.onnxc.specialise_shapes` (builds for the input "
                                                    "shapes a model of symbolic dims runs at: `background`, "
                                                    "the default, `sync` or `off`; docs/design.md) and "
                                                    "`session.onnxc.min_threaded_work` (with several intra-op "
                                                    "threads, a model of less work a run, static shapes only, "
                                                    "runs on the calling thread; default 33554432, or "
                                                    "`ONNXC_MIN_THREADED_WORK`; `0`: always the threads; "
                                                    "docs/performance.md)",
    ("SessionOptions", "add_free_dimension_override_by_name"): "done: the compiled code is specialised for the "
                                                               "size",
    ("SessionOptions", "add_free_dimension_override_by_denotation"): "done: the compiled code is specialised for "
                                                                     "the size",
    ("SessionOptions", "add_initializer"): "done: the value is compiled in place of the model's initializer",
    ("SessionOptions", "add_external_initializers"): "done: the values are compiled in place of the model's "
                                                     "initializers",
    ("SessionOptions", "execution_order"): "warns unless `DEFAULT`: nodes run in the graph's topological order",
    ("SessionOptions", "intra_op_num_threads"): "done: above 1 the parallel loops run on the "
                                                "context's own thread pool (results are bit for bit those of one thread); 0 means one thread per usable core; 1 "
                                                "builds serial code",
    ("SessionOptions", "execution_mode"): "done: with `ORT_PARALLEL` the nodes of one level run together on "
                                          "`inter_op_num_threads` threads",
    ("SessionOptions", "use_deterministic_compute"): "accepted: onnxc's results are always deterministic",
    ("SessionOptions", "register_custom_ops_library"): "done: a C ABI the generated code calls "
                                                       "(`docs/custom-ops.md`)",
    ("SessionOptions", "add_external_initializers_from_files_in_memory"): "not provided: external data is read "
                                                                          "from files next to the model",
    ("SessionOptions", "add_provider"): "not provided: choose providers with `InferenceSession(providers=...)`",
    ("SessionOptions", "add_provider_for_devices"): "not provided: choose providers with "
                                                    "`InferenceSession(providers=...)`",
    ("SessionOptions", "has_providers"): "not provided: providers are given to `InferenceSession`, not to "
                                         "`SessionOptions`",
    ("SessionOptions", "set_provider_selection_policy"): "not provided: providers are chosen by name, not by "
                                                         "policy",
    ("SessionOptions", "set_provider_selection_policy_delegate"): "not provided: providers are chosen by name, "
                                                                  "not by policy",
    ("SessionOptions", "set_ep_context_data_read_func"): "not provided: no EP context models",
    ("SessionOptions", "clear_ep_context_data_read_func"): "not provided: no EP context models",
    ("SessionOptions", "set_load_cancellation_flag"): "not provided: loading (compiling) is not cancellable",
    ("SessionOptions", "use_per_session_threads"): "not provided: threads are always the session's own "
                                                   "(a pool per session context in the generated code)",

    # --- RunOptions -----------------------------------------------------------------------------
    ("RunOptions", "log_severity_level"): "done: `0` logs the run, tagged with `run_tag`",
    ("RunOptions", "terminate"): "done: set from another thread, the run stops at its next node (bodies "
                                 "included) with `RuntimeFailure`, an onnxruntime `Fail`",
    ("RunOptions", "only_execute_path_to_fetches"): "done: a run asking for some outputs runs a model compiled "
                                                    "for just those (once per set of outputs)",
    ("RunOptions", "add_active_adapter"): "not provided: no LoRA adapters",

    # --- IOBinding ------------------------------------------------------------------------------
    ("IOBinding", "bind_input"): "done: reads the caller's memory at `buffer_ptr`, on `cpu` or `cuda`",
    ("IOBinding", "bind_output"): "done: the generated code writes the output into the bound buffer in place; "
                                  "bound to `cuda` without a GPU, it comes back in CPU memory as in onnxruntime",
    ("IOBinding", "get_outputs_as_ortvaluevector"): "not provided: the native form of `get_outputs`; use that",

    # --- OrtValue -------------------------------------------------------------------------------
    ("OrtValue", "ortvalue_from_numpy"): "done on `cpu` (no copy) and `cuda` (a copy in GPU memory)",
    ("OrtValue", "numpy"): "done: on `cpu` the array itself (no copy), on `cuda` a host copy",
    ("OrtValue", "as_sparse_tensor"): "not provided: onnxc's tensors are dense",
    ("OrtValue", "is_sparse_tensor"): "not provided: onnxc's tensors are dense",
    ("OrtValue", "ort_value_from_sparse_tensor"): "not provided: onnxc's tensors are dense",
    ("OrtValue", "from_dlpack"): "not provided: wrap a numpy array (`ortvalue_from_numpy`) or bind a device "
                                 "pointer (`IOBinding.bind_input`)",
    ("OrtValue", "is_tensor_sequence"): "not provided: sequences are fed and returned as Python lists",
    ("OrtValue", "ortvalue_from_numpy_with_onnx_type"): "not provided: `ortvalue_from_numpy` takes the array's "
                                                        "numpy type (ml_dtypes for bfloat16, float8, int4)",
    ("OrtValue", "tensor_size_in_bytes"): "not provided: `numpy().nbytes`",

    # --- enums ----------------------------------------------------------------------------------
    ("GraphOptimizationLevel", "ORT_ENABLE_LAYOUT"): "not provided: onnxc has no separate layout level; its "
                                                     "layout choices are made at `ORT_ENABLE_ALL`",
}

INTRO = """\
Code written for `onnxruntime` runs on onnxc by changing the import
(`import onnxc as ort`). This page lists every public name of onnxruntime's Python package
({ort}) and of the classes it offers, with its status in onnxc {onnxc}. **done** means the
same meaning as onnxruntime; **accepted** that the setting is taken and changes nothing;
**warns** that it is taken with a warning; **not provided** that onnxc has no such name, for
the reason given. Models run on the CPU, or on a GPU with `CUDAExecutionProvider`
(`docs/cuda.md`).

This page is generated: `python -m onnxc._api_diff --write docs/onnxruntime-api.md` compares
the two installed packages; the explanations are the `NOTES` table of `onnxc/_api_diff.py`
(edit them there). `tests/test_api_diff.py` fails when the page is out of date or when a name
onnxruntime has is neither in onnxc nor explained.
"""

EXCEPTIONS = """\
onnxruntime raises one class per status from `onnxruntime.capi.onnxruntime_pybind11_state`;
onnxc has the same classes under `onnxc.capi.onnxruntime_pybind11_state`, and each of onnxc's
exceptions (`compiler/errors.py`) derives from the one naming the same failure, and from a
built-in exception, so handlers written for either keep working:
"""


@dataclasses.dataclass
class Row:
    section: str
    name: str
    in_ort: bool
    in_onnxc: bool
    note: Optional[str]

    @property
    def status(self) -> str:
        if self.note:
            return self.note
        return "done" if self.in_onnxc else "MISSING: neither in onnxc nor explained in onnxc/_api_diff.py NOTES"


def _public(obj: Any) -> set[str]:
    """Public members of a module, class or enum: attributes, dataclass fields and (for
    classes built without arguments) what a fresh instance sets."""
    if isinstance(obj, type) and hasattr(obj, "__members__") and (issubclass(obj, enum.Enum)
                                                                  or "pybind11" in repr(type(obj))):
        return set(obj.__members__)
    names = {n for n in dir(obj) if not n.startswith("_")}
    if isinstance(obj, types.ModuleType):   # submodules are not API (but for onnxruntime's capi)
        return {n for n in names if n == "capi" or not isinstance(getattr(obj, n), (types.ModuleType, __future__._Feature))}
    if dataclasses.is_dataclass(obj):
        names |= {f.name for f in dataclasses.fields(obj)}
    try:
        names |= {n for n in vars(obj()) if not n.startswith("_")}
    except Exception:  # noqa: BLE001 - a class that needs arguments: its dir() is what we have
        pass
    return names


def _module_names(ort: types.ModuleType) -> set[str]:
    # names onnxruntime's __init__ imports for its own use, not API
    return _public(ort) - {"contextlib", "onnxruntime_validation"}


def diff(ort: types.ModuleType, onnxc: types.ModuleType) -> list[Row]:
    """One row per public name of onnxruntime, and per name onnxc adds, section by section."""
    rows = []
    for section in (MODULE, *CLASSES):
        theirs = _module_names(ort) if section == MODULE else _public(getattr(ort, section))
        ours = _public(onnxc) if section == MODULE else _public(getattr(onnxc, section))
        for name in sorted(theirs | ours, key=lambda n: (n not in theirs, n.lower())):
            rows.append(Row(section, name, name in theirs, name in ours, NOTES.get((section, name))))
    return rows


def problems(rows: list[Row]) -> list[str]:
    """What makes the page untrue: a name onnxruntime has that onnxc neither has nor explains,
    and notes about names onnxruntime no longer has."""
    out = [f"{r.section}: {r.name} is not in onnxc and has no entry in NOTES"
           for r in rows if r.in_ort and not r.in_onnxc and not r.note]
    known = {(r.section, r.name) for r in rows if r.in_ort}
    out += [f"NOTES has {section}: {name}, which onnxruntime does not have" for section, name in NOTES
            if (section, name) not in known]
    return out


def _exception_rows(onnxc: types.ModuleType) -> list[str]:
    from .capi import onnxruntime_pybind11_state as state
    from .compiler import errors
    ours = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.OnnxcError)
            and c is not errors.OnnxcError]
    lines = ["| onnxruntime class | onnxc exceptions that are one |", "|---|---|"]
    for name in state.__all__:
        status = getattr(state, name)
        mine = [c for c in ours if issubclass(c, status)]
        text = ", ".join(f"`{c.__name__}` ({', '.join(b.__name__ for b in _builtin_bases(c))})" for c in mine)
        lines.append(f"| `{name}` | {text or '(none: onnxc never fails this way)'} |")
    return lines


def _builtin_bases(cls: type) -> list[type]:
    return [b for b in cls.__mro__[1:] if b.__module__ == "builtins" and b not in (Exception, BaseException, object)]


def render(rows: list[Row], ort: types.ModuleType, onnxc: types.ModuleType) -> str:
    out = ["# onnxruntime's Python API in onnxc", "",
           INTRO.format(ort=f"onnxruntime {ort.__version__}", onnxc=onnxc.__version__)]
    for section in (MODULE, *CLASSES):
        part = [r for r in rows if r.section == section]
        out += [f"## {'Module `onnxc`' if section == MODULE else f'`{section}`'}", "", "| name | status |", "|---|---|"]
        out += [f"| `{r.name}` | {r.status} |" for r in part if r.in_ort]
        extra = [r.name for r in part if not r.in_ort]
        if extra:
            out += ["", "onnxc's own: " + ", ".join(f"`{n}`" for n in extra) + "."]
        out.append("")
    out += ["## Exceptions", "", EXCEPTIONS, *_exception_rows(onnxc), ""]
    return "\n".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    import onnxruntime

    import onnxc
    parser = argparse.ArgumentParser(prog="python -m onnxc._api_diff", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help="write the page to PATH")
    group.add_argument("--check", metavar="PATH", help="exit 1 if PATH is not the page this would write")
    args = parser.parse_args(argv)
    rows = diff(onnxruntime, onnxc)
    text = render(rows, onnxruntime, onnxc)
    issues = problems(rows)
    for issue in issues:
        print(f"api diff: {issue}", file=sys.stderr)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write(text)
    elif args.check:
        with open(args.check, encoding="utf-8") as f:
            if f.read() != text:
                print(f"api diff: {args.check} is out of date: run python -m onnxc._api_diff --write {args.check}",
                      file=sys.stderr)
                return 1
    else:
        for r in rows:
            if r.in_ort != r.in_onnxc:
                print(f"{r.section}: {r.name}: {'onnxc only' if r.in_onnxc else r.status}")
    return 1 if issues else 0


if __name__ == "__main__":
    sys.exit(main())
