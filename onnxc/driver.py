"""The compile driver: model -> IR -> passes -> C -> shared library, written as an artifact folder.

An artifact folder holds ``model.c``, ``model.h``, the shared library, the
weights file and ``manifest.json``, which the runtime reads to load it.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import queue
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import xxhash

from . import __version__
from .codegen import embedded as embedded_package
from .codegen.c_emitter import CEmitter, CModel, EmitOptions, gemm_helper_unit
from .codegen.cuda_emitter import CudaEmitter
from .codegen.kernel import Target
from .codegen.toolchain import GEMM_TILE, CudaToolchain, HelperObject, Toolchain
from .codegen.work import SERIAL_WORK
from .compiler import frontend, mapped
from .compiler.errors import CompileError, InvalidArgument, RankKnownAtRunTime, UnsupportedError
from .compiler.ir import Graph
from .compiler.ops import registry
from .compiler.ops._custom import registrations as custom_registrations
from .runtime import cache, object_cache
from .runtime import custom_ops as custom_op_library
from .runtime.options import usable_cores
from .compiler.passes.pipeline import LOWERINGS, run_pipeline

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
LIBRARY = "libmodel.so"
WEIGHTS = "weights.bin"
# A model with values of run-time rank: the artifact holds the model, compiled per input signature.
SPECIALISED_MODEL = "model.onnx"
# A CUDA build holds its model too (the caller's dims and initializers applied): where the build
# cannot run (no GPU, one of another architecture), the session compiles it for what can.
HELD_MODEL = "model.onnx"


@dataclass
class CompileOptions:
    """What changes the generated code (every field is part of the cache key)."""
    optimization_level: int = 99          # 0 = none, 1 = basic, 2 = extended, 99 = all
    disabled_passes: tuple[str, ...] = ()
    opt: str = "-O3"                       # C compiler optimization flag
    march: str = "native"                  # "" for a portable build
    prefix: str = "model"
    check_ir: bool = False                 # verify the IR after every pass
    extra_cflags: tuple[str, ...] = field(default_factory=tuple)
    # Symbolic input dims fixed by the caller: ("name" | "denotation", key, size); the code is
    # specialised for them (SessionOptions.add_free_dimension_override_by_*).
    dim_overrides: tuple[tuple[str, str, int], ...] = ()
    # --target c: symbolic input dims the package serves up to a bound (name, max): the arena
    # is planned for the bounds, the sizes are given at run time (NAME_run_dims).
    dim_bounds: tuple[tuple[str, int], ...] = ()
    profile: bool = False                  # time each node inside the generated code
    # Intermediates: "arena" (one planned arena, buffers reused by liveness), "no_reuse" (the
    # arena without reuse) or "heap" (allocated per run: enable_cpu_mem_arena/mem_pattern off).
    memory: str = "arena"
    # Intra-op threads (SessionOptions.intra_op_num_threads): above 1 the code is built with
    # OpenMP and its heavy loops (GEMM tiles, large elementwise maps) run on that many threads.
    threads: int = 1
    # Inter-op threads (ExecutionMode.ORT_PARALLEL): nodes of one level run together on them.
    inter_threads: int = 0
    # A build for several intra-op threads whose run is less work than this (multiply-adds and
    # elements written, from static shapes: codegen/work.py) runs every node on the calling
    # thread, as a 1-thread build; 0: always the threads.
    min_threaded_work: int = SERIAL_WORK
    # Initializer values given by the caller (SessionOptions.add_initializer): name -> digest;
    # the arrays themselves travel in ``initializers`` (not part of the key).
    initializer_digests: tuple[tuple[str, str], ...] = ()

    def toolchain(self) -> Toolchain | CudaToolchain:
        if self.target == "cuda":
            return CudaToolchain(archs=self.cuda_archs, emulate=self.cuda_emulate)
        # Threads: GCC outlines the kernels' OpenMP constructs, and the model's own pool serves
        # them (c/helpers/pool.c.j2); --as-needed leaves out the OpenMP runtime -fopenmp links,
        # which then nothing calls (other compilers' builds keep theirs).
        threaded = self.threads > 1 or self.inter_threads > 0
        extra = list(self.extra_cflags) + (["-fopenmp", "-pthread", "-Wl,--as-needed"] if threaded else [])
        if self.denormal_as_zero:   # the value: how many threads (the caller's and OpenMP's) flush
            extra.append(f"-DONNXC_DENORMAL_AS_ZERO={max(self.threads, self.inter_threads, 1)}")
        return Toolchain(opt=self.opt, march=self.march, extra=extra)

    # Custom-op libraries (SessionOptions.register_custom_ops_library): (path, sha256) pairs.
    custom_ops: tuple[tuple[str, str], ...] = ()
    # Only these outputs (RunOptions.only_execute_path_to_fetches): the rest of the graph is dropped.
    outputs: tuple[str, ...] = ()
    # "native": a shared library for this machine (the artifact the runtime loads); "c": a
    # freestanding C99 source package for any target (codegen/embedded.py).
    target: str = "native"
    # --target c: the weights as typed arrays in weights.c ("c"), or as weights.bin that the
    # caller loads and hands to <name>_init ("bin", little-endian values).
    weights: str = "c"
    # Requantization of the int8 Conv and matrix-product kernels' int32 accumulators: "float"
    # (onnxruntime's float32(acc) * scale rounded half to even) or "fixed_point" (TFLite's and
    # CMSIS-NN's 31-bit multiplier and shift, computed at compile time; docs/embedded.md).
    requantize: str = "float"
    # --target c: eligible int8 Conv and depthwise Conv nodes call CMSIS-NN's kernels, which the
    # program links (docs/embedded.md); the others keep the portable kernels. Requantization is
    # then fixed point everywhere, so both kinds of kernel give the same bits.
    cmsis_nn: bool = False
    # target "cuda": the device (CUDAExecutionProvider's device_id), the GPU architectures nvcc
    # builds for (the GPU present, or sm_80 and sm_90 when none is), and host emulation of the
    # CUDA runtime instead of nvcc (tests on machines without a GPU: the same source, run on the CPU).
    cuda_device: int = 0
    cuda_archs: tuple[str, ...] = ("sm_80", "sm_90")
    cuda_emulate: bool = False
    # float32 GEMM and convolution on tensor cores in TF32 (CUDAExecutionProvider's use_tf32, on by default)
    cuda_tf32: bool = True
    # session.set_denormal_as_zero=1: each run flushes denormal floats to zero (FTZ/DAZ), then
    # restores the caller's floating-point mode (templates/c/runtime.c.j2, onnxc_fpmode_flush).
    denormal_as_zero: bool = False
    # "bf16": the float32 GEMMs and convolutions multiply in bfloat16 with float32 sums, on CPUs
    # with AVX512-BF16 (``check_precision``); "fp32" (the default): float32 throughout.
    precision: str = "fp32"
    initializers: Optional[dict] = field(default=None, compare=False, repr=False)
    # One input signature of a model with values of run-time rank (runtime/specialise.py): the
    # dims of every tensor input, (name, dims) pairs, and the elements of small integer inputs,
    # (name, dtype name, dims, elements), which become constants of the compiled code.
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    input_values: tuple[tuple[str, str, tuple[int, ...], tuple[int, ...]], ...] = ()

    def key(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("check_ir")
        data.pop("initializers")
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "CompileOptions":
        """The options a manifest records (``key()``'s fields; lists back to tuples)."""
        def frozen(x: Any) -> Any:
            return tuple(frozen(e) for e in x) if isinstance(x, list) else x
        names = {f.name for f in dataclasses.fields(cls)} - {"check_ir", "initializers"}
        return cls(**{k: frozen(v) for k, v in data.items() if k in names})


def _command_line() -> str:
    argv = [os.path.basename(sys.argv[0]) or "python"] + sys.argv[1:]
    return " ".join(shlex.quote(a) for a in argv)


# on_stage(stage, info) is called as each stage of a compile ends, with info["seconds"] the stage's
# wall time: "load/check"; "pass" (info["name"]) for each pass that ran; "codegen" (info["units"]: the
# translation units the C compile builds, with the helper objects it links); "compile" for each unit
# built (info["unit"], ["done"], ["total"], ["cpu"]: the compiler's CPU seconds, 0 for a helper object
# the compile cache had); "link". A callback that raises stops the compile.
StageCallback = Callable[[str, dict[str, Any]], None]


class _Stages:
    """Times consecutive stages and reports each one's end to the callback."""

    def __init__(self, on_stage: Optional[StageCallback]) -> None:
        self.on_stage = on_stage
        self.mark = time.perf_counter()

    def done(self, stage: str, **info: Any) -> None:
        now = time.perf_counter()
        if self.on_stage is not None:
            self.on_stage(stage, {"seconds": now - self.mark, **info})
        self.mark = now


def compile_model(source: frontend.ModelSource, output_dir: str | os.PathLike,
                  options: Optional[CompileOptions] = None, command: Optional[str] = None,
                  on_stage: Optional[StageCallback] = None) -> dict[str, Any]:
    """Compile ``source`` into ``output_dir`` (created; files replaced). Returns the manifest.
    ``on_stage`` hears of each stage as it ends (see ``StageCallback``)."""
    options = options or CompileOptions()
    with _custom_ops(options) as descs:
        return _compile(source, output_dir, options, command, descs, _Stages(on_stage))


def compile_cached(source: frontend.ModelSource, options: CompileOptions, on_stage: Optional[StageCallback] = None,
                   command: Optional[str] = None,
                   on_build: Optional[Callable[[], None]] = None) -> tuple[str, bool]:
    """The artifact folder of ``source`` built with ``options`` in the compile cache, and whether
    this call built it (``on_build`` is called first) rather than finding it there."""
    key = cache.artifact_key(cache.model_digest(source), options.key(), options.toolchain().identity())
    built = []

    def build(folder: str) -> None:
        if on_build is not None:
            on_build()
        built.append(True)
        compile_model(source, folder, options, command=command, on_stage=on_stage)
    return cache.get_or_build(key, build), bool(built)


def generate_source(source: frontend.ModelSource, options: Optional[CompileOptions] = None,
                    command: Optional[str] = None) -> CModel:
    """What compile_model writes, without writing or building it: the generated translation
    unit, header and weights (e.g. to check a CUDA build with nvcc on a machine without a GPU)."""
    options = options or CompileOptions()
    with _custom_ops(options) as descs:
        return _compile(source, None, options, command, descs, _Stages(None))


def optimize(source: frontend.ModelSource, options: Optional[CompileOptions] = None,
             on_stage: Optional[StageCallback] = None) -> Graph:
    """The front half of every compile: the model loaded and checked, the caller's dims,
    initializers and input signature applied, and the passes of ``options`` run. Returns the
    IR graph the code generator would be given (``optimized_model_filepath`` exports it)."""
    options = options or CompileOptions()
    with _custom_ops(options) as descs:
        return _optimize(source, options, descs, _Stages(on_stage))


@contextlib.contextmanager
def _custom_ops(options: CompileOptions) -> Iterator[list]:
    """The custom-op libraries of ``options`` described, and their ops visible to the frontend."""
    descs = [d for path, _ in options.custom_ops for d in custom_op_library.describe(path)]
    with registry.extra_ops(custom_registrations(descs)):
        yield descs


PRECISIONS = ("fp32", "bf16")
# What the bfloat16 GEMM's instructions need (cpuinfo spelling): vcvtne2ps2bf16 and vdpbf16ps,
# and vpermw (AVX512-BW) to interleave the pairs. CPUs with AMX-BF16 have them too.
BF16_FEATURES = ("avx512_bf16", "avx512bw")


def check_precision(options: CompileOptions) -> None:
    """Raises InvalidArgument unless ``options.precision`` is one this build can compile: "fp32",
    or "bf16" for a native build whose target CPU (``--march``) has ``BF16_FEATURES``."""
    if options.precision not in PRECISIONS:
        raise InvalidArgument(f"precision {options.precision!r}: expected one of {', '.join(PRECISIONS)}")
    if options.precision == "fp32":
        return
    if options.target != "native":
        raise InvalidArgument(f"precision bf16: not with --target {options.target} (the bfloat16 GEMM is an "
                              "AVX512-BF16 kernel of native CPU builds)")
    toolchain = options.toolchain()
    assert isinstance(toolchain, Toolchain)
    lacking = [f for f in BF16_FEATURES if f not in toolchain.isa()]
    if lacking:
        cpu = f"-march={options.march}" if options.march else "a portable build"
        raise InvalidArgument(f"precision bf16 needs a CPU with {' and '.join(BF16_FEATURES)} (bfloat16 "
                              f"dot products); the target CPU ({cpu}) lacks {', '.join(lacking)}. Use precision "
                              "fp32, or compile on (or --march for) a CPU that has them (AVX512-BF16: Intel "
                              "Cooper Lake, Sapphire Rapids and later, AMD Zen 4 and later)")


def _check_options(options: CompileOptions, descs: list) -> None:
    if options.target not in ("native", "c", "cuda"):
        raise ValueError(f"unknown target {options.target!r} (native, c or cuda)")
    check_precision(options)
    embedded_package.check_prefix(options.prefix)
    if options.target == "cuda" and (options.threads > 1 or options.inter_threads or options.profile):
        raise ValueError("CUDA builds run without host threads or profiling")
    if options.target == "cuda" and descs:   # (a session runs such a model on the CPU, with a warning)
        raise UnsupportedError("not on the GPU: custom operators are host C functions of the C build")
    if options.weights not in ("c", "bin") or (options.weights == "bin" and options.target != "c"):
        raise ValueError("weights: 'c' or 'bin', and 'bin' only with --target c")
    if options.dim_bounds and options.target != "c":
        raise ValueError("dim_bounds: only with --target c")
    if options.requantize not in ("float", "fixed_point") or (options.requantize != "float"
                                                              and options.target == "cuda"):
        raise ValueError("requantize: 'float' or 'fixed_point', and 'fixed_point' not with --target cuda")
    if options.cmsis_nn and options.target != "c":
        raise ValueError("cmsis_nn: only with --target c (a package for a microcontroller)")
    if options.target == "c" and (options.threads > 1 or options.inter_threads or options.profile or descs
                                  or options.memory != "arena"):
        raise ValueError("--target c builds run on one thread, without profiling, custom ops or heap memory")


def _load(source: Any, options: CompileOptions) -> Any:
    """The model with the caller's dims and initializers, before any input signature."""
    model = frontend.load_model(source)
    if options.dim_overrides:
        model = frontend.fix_input_dims(model, options.dim_overrides)
    if options.initializers:
        model = frontend.replace_initializers(model, options.initializers)
    return model


def _optimize(source: Any, options: CompileOptions, descs: list, stages: _Stages,
              on_loaded: Optional[Callable[[Graph], None]] = None) -> Graph:
    _check_options(options, descs)
    model = _load(source, options)
    if options.input_shapes or options.input_values:
        model = frontend.specialise_inputs(model, options.input_shapes, options.input_values)
    graph = frontend.build_graph(model)
    maps = [v.name for v in graph.inputs if v.kind == "map"]
    if maps and options.target in ("c", "cuda"):
        # (a package's caller and the CUDA runtime exchange tensors only; maps are built from Python dicts)
        raise UnsupportedError(f"--target {options.target}: map inputs {maps} are only supported by the host "
                               "runtime's InferenceSession")
    if options.outputs:
        keep = [i for i, name in enumerate(graph.output_names) if name in options.outputs]
        graph.outputs = [graph.outputs[i] for i in keep]
        graph.output_names = [graph.output_names[i] for i in keep]
    stages.done("load/check", nodes=len(graph.nodes))
    if on_loaded is not None:
        on_loaded(graph)
    simd = options.target != "native" or bool(options.toolchain().simd())
    run_pipeline(graph, level=options.optimization_level, check=options.check_ir, simd=simd,
                 disabled=set(options.disabled_passes), target=options.target,
                 trace=lambda name, _: stages.done("pass", name=name))
    return graph


# Ops that mostly lower onto the GEMM helper. A native build of a model with one of them gets
# the GEMM's helper object (the longest job of a small model's C compile, about 2 s of CPU)
# compiled beside the model's loading and optimization, where a second core has nothing to do;
# a model whose kernels then call no GEMM leaves the object in the cache for the next one.
GEMM_OPS = frozenset({"Conv", "ConvTranspose", "FusedConv", "BlockedConv", "Gemm", "MatMul", "FusedMatMul", "Einsum", "Attention",
                      "MultiHeadAttention", "GroupQueryAttention", "LSTM", "GRU", "RNN"})


def _calls_gemm(graph: Graph) -> bool:
    return any(n.op_type in GEMM_OPS or any(_calls_gemm(body) for body in n.subgraphs.values())
               for n in graph.nodes)


class _HelperPrefetch:
    """Helper objects compiled into the compile cache, one after another on a thread of their
    own, while the model is still loaded, optimized and generated: the GEMM's once the loaded
    model shows a GEMM-like op, the others as soon as code generation asks for them. The build
    then finds them there, and reports the CPU time spent on each as its own."""

    def __init__(self, toolchain: Toolchain | CudaToolchain) -> None:
        self.toolchain = toolchain
        self.thread: Optional[threading.Thread] = None   # the one working through the queue now
        self.threads: list[threading.Thread] = []
        self.queue: list[tuple[str, str]] = []
        self.done: dict[str, threading.Event] = {}
        self.cpu: dict[str, float] = {}
        self.lock = threading.Lock()

    def add(self, name: str, text: str) -> None:
        with self.lock:
            if name in self.done:
                return
            self.done[name] = threading.Event()
            self.queue.append((name, text))
            if self.thread is None:
                self.thread = threading.Thread(target=self._work, name="onnxc-helper-prefetch", daemon=True)
                self.threads.append(self.thread)
                self.thread.start()

    def _work(self) -> None:
        toolchain = self.toolchain
        assert isinstance(toolchain, Toolchain)
        while True:
            with self.lock:
                if not self.queue:
                    self.thread = None
                    return
                name, text = self.queue.pop(0)
            try:
                # (a failure is the model build's to report: it compiles the object again)
                with contextlib.suppress(CompileError, OSError):
                    self.cpu[name] = object_cache.helper_object(text, toolchain.object_identity(),
                                                                toolchain.build_object)[1]
            finally:
                self.done[name].set()

    def join(self) -> None:
        """Waits for every object asked for and for the thread itself (a compile leaves none running)."""
        for thread in list(self.threads):
            thread.join()

    def get(self, name: str, get: Callable[[], tuple[str, float]]) -> tuple[str, float]:
        """The helper object ``name`` (``get()``) and the CPU time compiling it took, here or
        in the prefetch."""
        path, cpu = get()
        if cpu == 0 and name in self.done:
            self.done[name].wait()
            cpu = self.cpu.get(name, 0.0)
        return path, cpu


def _compile(source: Any, output_dir: Any, options: CompileOptions, command: Optional[str], descs: list,
             stages: _Stages) -> Any:
    toolchain = options.toolchain()
    embedded = options.target == "c"
    cuda = options.target == "cuda"
    # a package is portable C: its packed weights fit the scalar micro-kernel on any compiler
    mr, nr = GEMM_TILE["" if embedded or cuda else toolchain.simd()]
    target = Target(gemm_mr=mr, gemm_nr=nr,
                    # (the CUDA kernels read weights as they are)
                    prepack=options.optimization_level >= 99 and not cuda,
                    # (not in a package: its transformed filters take 1.8-4x the weights' memory;
                    # in bf16 its products stay float32: c/helpers/winograd.j2)
                    winograd=options.optimization_level >= LOWERINGS["conv_winograd"]
                    and "conv_winograd" not in options.disabled_passes and not embedded and not cuda,
                    # (not in bf16: its GEMMs and convolutions are the GEMM's, in bf16)
                    direct_conv=options.optimization_level >= LOWERINGS["conv_direct"]
                    and "conv_direct" not in options.disabled_passes and not embedded and not cuda
                    and options.precision != "bf16",
                    threads=max(options.threads, 1), small_memory=embedded, integer_only=embedded,
                    int8_gemm=not embedded and not cuda,
                    system_libraries=not embedded, cmsis_nn=options.cmsis_nn,
                    requantize="fixed_point" if options.cmsis_nn else options.requantize,
                    precision=options.precision, tiled_transpose=not cuda)
    prefetch = _HelperPrefetch(toolchain)
    early = output_dir is not None and not embedded and not cuda   # (a library is built: its helper objects too)
    emit_options = EmitOptions(prefix=options.prefix, command=command or _command_line(), version=__version__,
                               profile=options.profile, memory=options.memory, threads=options.threads,
                               inter_threads=options.inter_threads, min_threaded_work=options.min_threaded_work,
                               target=target, embedded=embedded,
                               weights_file=options.weights, dim_bounds=dict(options.dim_bounds),
                               units=0 if embedded or cuda else usable_cores(),
                               helper_objects=not embedded and not cuda,
                               on_shared_helper=prefetch.add if early else None)

    def loaded(graph: Graph) -> None:
        if early and _calls_gemm(graph):
            for name, text in gemm_helper_unit(emit_options).items():
                prefetch.add(name, text)
    # The manifest names the model by the cache's digest of it: taken on a thread of its own
    # while the model loads (hashing GPT-2's 650 MB file takes most of a second; a session found
    # it already, in the cache's index).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as hasher:
        digest = hasher.submit(cache.model_digest, source) if output_dir is not None and not embedded else None
        try:
            return _emit_and_build(source, output_dir, options, command, descs, stages, toolchain, emit_options,
                                   loaded, prefetch, digest)
        finally:
            prefetch.join()


def _emit_and_build(source: Any, output_dir: Any, options: CompileOptions, command: Optional[str], descs: list,
                    stages: _Stages, toolchain: Toolchain | CudaToolchain, emit_options: EmitOptions,
                    on_loaded: Callable[[Graph], None], prefetch: _HelperPrefetch,
                    model_digest: Optional[concurrent.futures.Future]) -> Any:
    embedded, cuda = emit_options.embedded, options.target == "cuda"
    try:
        graph = _optimize(source, options, descs, stages, on_loaded)
    except RankKnownAtRunTime as e:
        if output_dir is None or options.target == "c" or options.input_shapes or options.input_values:
            raise
        return _write_specialising(_load(source, options), os.fspath(output_dir), options, str(e))
    emitter = CudaEmitter if cuda else CEmitter
    extra: dict[str, Any] = {"device": options.cuda_device, "tf32": options.cuda_tf32} if cuda else {}
    # A library's weights file is written, and its checksum taken, on a thread of its own as code
    # generation places the constants (then the C compile): the library reads it only when it is
    # loaded, and writing a language model's hundreds of megabytes takes seconds.
    writer = None
    if output_dir is not None and not embedded:
        os.makedirs(output_dir, exist_ok=True)
        writer = _WeightsWriter(os.path.join(os.fspath(output_dir), WEIGHTS))
        emit_options = dataclasses.replace(emit_options, on_weights=writer.add)
    try:
        return _build(source, graph, emitter(graph, emit_options, **extra).emit(), output_dir, options, command,
                      descs, stages, toolchain, prefetch, model_digest, writer)
    finally:
        if writer is not None:
            writer.abort()   # (a no-op once the file is in place)


def _build(source: Any, graph: Graph, emitted: CModel, output_dir: Any, options: CompileOptions,
           command: Optional[str], descs: list, stages: _Stages, toolchain: Toolchain | CudaToolchain,
           prefetch: _HelperPrefetch, model_digest: Optional[concurrent.futures.Future],
           writer: Optional[_WeightsWriter]) -> Any:
    embedded, cuda = options.target == "c", options.target == "cuda"
    units = {"model.cu": emitted.source} if cuda else emitted.units or {"model.c": emitted.source}
    sources = [name for name in units if not name.endswith(".h")]
    stages.done("codegen", units=len(sources) + len(emitted.helper_units))
    if output_dir is None:
        return emitted
    output_dir = os.fspath(output_dir)
    if embedded:
        return embedded_package.write_package(emitted, output_dir, command or _command_line(), __version__,
                                              graph.name)
    assert writer is not None and model_digest is not None   # (both made for a library's folder)
    # (the helper units too, compiled from the cache's copy: the folder rebuilds the library by hand)
    for name, text in {**units, **emitted.helper_units, "model.h": emitted.header}.items():
        _write_atomic(os.path.join(output_dir, name), text.encode())
    lib_tmp = os.path.join(output_dir, f".{LIBRARY}.{os.getpid()}.tmp")

    def unit_built(name: str, done: int, seconds: float, cpu: float) -> None:
        stages.done("compile", unit=name, done=done, total=len(sources) + len(helpers), seconds=seconds, cpu=cpu)
    helpers: list[HelperObject] = []
    if emitted.helper_units:   # (C builds only: a CUDA build is one model.cu)
        c_toolchain = toolchain
        assert isinstance(c_toolchain, Toolchain)
        helpers = [HelperObject(os.path.join(output_dir, name), functools.partial(prefetch.get, name, functools.partial(
                       object_cache.helper_object, text, c_toolchain.object_identity(), c_toolchain.build_object)))
                   for name, text in emitted.helper_units.items()]
    toolchain.build_shared([os.path.join(output_dir, name) for name in sources], lib_tmp,
                           jobs=usable_cores(), on_unit=unit_built, libraries=emitted.libraries, helpers=helpers,
                           graph_unit=os.path.join(output_dir, emitted.graph_unit) if emitted.graph_unit else None)
    weights_checksum = writer.finish()
    stages.done("link")
    os.replace(lib_tmp, os.path.join(output_dir, LIBRARY))
    manifest = {
        "format": MANIFEST_FORMAT,
        "onnxc_version": __version__,
        "prefix": emitted.prefix,
        "library": LIBRARY,
        "weights": WEIGHTS,
        "weights_xxh3_128": weights_checksum,
        "library_sha256": cache.sha256_file(os.path.join(output_dir, LIBRARY)),
        "arena_bytes": emitted.arena_bytes,
        "inputs": emitted.inputs,
        "outputs": emitted.outputs,
        "functions": emitted.functions,
        "meta": dataclasses.asdict(graph.meta),
        "toolchain": toolchain.identity(),
        "helper_units": sorted(emitted.helper_units),   # linked as objects of the compile cache
        "isa": toolchain.isa(),   # the CPU features the library needs (runtime/cpu.py)
        "device": "cuda" if cuda else "cpu",
        "options": json.loads(options.key()),
        # (the cache's digest of the model: a session given this folder with other options finds
        # the matching build in the cache by it)
        "model_sha256": model_digest.result(),
        "source": os.path.basename(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else None,
    }
    if cuda:
        held = mapped.with_data(_load(source, options)).SerializeToString()
        _write_atomic(os.path.join(output_dir, HELD_MODEL), held)
        manifest.update(model=HELD_MODEL, model_file_sha256=hashlib.sha256(held).hexdigest())
    manifest.update(emitted.extra)   # profile_nodes in profiling builds
    manifest["nodes"] = [{"name": n.name, "op": n.op_type, "domain": n.domain} for n in graph.nodes]
    if descs:  # the table the generated code indexes: which op of which library, in order
        manifest["custom_ops"] = [{"domain": d.domain, "name": d.name, "library": d.library} for d in descs]
    _write_atomic(os.path.join(output_dir, MANIFEST), json.dumps(manifest, indent=2).encode())
    return manifest


def _write_specialising(model: Any, output_dir: str, options: CompileOptions, reason: str) -> dict[str, Any]:
    """The artifact of a model some of whose ranks are known only at run time: the model itself,
    which the runtime compiles once per input signature (runtime/specialise.py)."""
    os.makedirs(output_dir, exist_ok=True)
    data = mapped.with_data(model).SerializeToString()
    _write_atomic(os.path.join(output_dir, SPECIALISED_MODEL), data)
    manifest = {
        "format": MANIFEST_FORMAT,
        "onnxc_version": __version__,
        "specialise": reason,
        "library": None,
        "weights": SPECIALISED_MODEL,    # (checked like weights: a changed model is a damaged artifact)
        "weights_xxh3_128": xxhash.xxh3_128_hexdigest(data),
        "inputs": frontend.input_info(model),
        "outputs": frontend.output_info(model, options.outputs),
        "meta": dataclasses.asdict(frontend.build_graph(model).meta),
        "device": "cuda" if options.target == "cuda" else "cpu",
        "options": json.loads(options.key()),
    }
    _write_atomic(os.path.join(output_dir, MANIFEST), json.dumps(manifest, indent=2).encode())
    return manifest


class _WeightsWriter:
    """Writes the weights file at ``path`` from the pieces code generation hands to ``add`` (in
    order, views of the constants), on a thread of its own, and takes its checksum (XXH3, 128
    bits). ``finish`` puts the file in place and returns the checksum; ``abort`` (after a
    failure) removes what was written."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd, self.tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        self.file = os.fdopen(fd, "wb")
        self.hash = xxhash.xxh3_128()   # (runtime/cache.py: xxh3_file)
        self.error: Optional[BaseException] = None
        self.pieces: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._write, name="onnxc-weights", daemon=True)
        self.thread.start()
        self.done = False

    def add(self, piece: memoryview) -> None:
        self.pieces.put(piece)

    def _write(self) -> None:
        while (piece := self.pieces.get()) is not None:
            if self.error is None:
                try:
                    self.file.write(piece)
                    self.hash.update(piece)
                except BaseException as e:   # (raised by finish, in the compiling thread)
                    self.error = e

    def _stop(self) -> None:
        if not self.done:
            self.done = True
            self.pieces.put(None)
            self.thread.join()
            self.file.close()

    def finish(self) -> str:
        self._stop()
        if self.error is not None:
            raise self.error
        os.replace(self.tmp, self.path)
        return self.hash.hexdigest()

    def abort(self) -> None:
        self._stop()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def _write_atomic(path: str, data: bytes | bytearray) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
