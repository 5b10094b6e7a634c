"""Building generated C with the system compiler."""
from __future__ import annotations

import concurrent.futures
import functools
import os
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ..compiler.errors import CompileError
from .system_libraries import library_flags

# Warnings are bugs in generated code, so they fail the build.
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


# GCC's optimization of a model's units and of the helper objects when the build asks for -O3:
# -O2 with -O3's cost model for vectorizing (-O2's vectorizes only loops that need no check or
# remainder, and the node functions' loops lose 6% on SqueezeNet without it). The helper
# objects' kernels are written with intrinsics, which -O3 does not make faster, and the GEMM's
# object at -O3 was the longest job of a small model's cold compile (3.5 s of CPU against 1.9 s).
# The measurements are in benchmarks/README.md (Compile time).
UNIT_OPT: dict[str, tuple[str, ...]] = {"-O3": ("-O2", "-fvect-cost-model=dynamic")}

# The graph unit of a split build (model.c: the graph's functions, which call the node functions
# of the other units in order, check each result and release memory; no kernel, no loop over
# data) is compiled without optimization. There is nothing there for an optimizer to gain, and
# GCC's time grows faster than the function: GPT-2's graph function (1,355 nodes) takes 12.5 s
# of CPU at -O2, 6.8 s at -O1 and 2.1 s at -O0, the longest unit of its build.
GRAPH_OPT: tuple[str, ...] = ("-O0",)


@dataclass
class Toolchain:
    cc: str = field(default_factory=lambda: os.environ.get("CC", "cc"))
    opt: str = "-O3"
    march: str = "native"
    extra: list[str] = field(default_factory=list)

    def flags(self, opt: Sequence[str] = ()) -> list[str]:
        """The compiler's flags, with the optimization flags ``opt`` (default: the build's, ``self.opt``)."""
        # -fno-math-errno and -fno-trapping-math change no value: they let math calls become
        # instructions and float selects (clamps, NaN checks) become vector blends, so loops
        # over onnxc_expf / onnxc_tanhf / onnxc_erff vectorize. -ffp-contract=fast (the
        # default of GNU C, off under -std=c11) lets a * b + c be one fused multiply-add where
        # the target has one, as onnxruntime's kernels compute: polynomials and epilogues take
        # fewer instructions and round once.
        flags = [*(opt or [self.opt]), "-std=c11", *WARNINGS, "-fPIC", "-shared", "-fvisibility=hidden",
                 "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast"]
        if self.march:
            flags.append(f"-march={self.march}")
        flags += list(self.extra)
        macros = target_macros(self.cc, tuple(flags))
        if macros & {"__x86_64__", "__i386__"}:
            # gcc expands copies of unknown length (im2col rows, state copies) inline as
            # `rep movs`, whose start-up cost dwarfs copies of tens of bytes; libc's memcpy
            # picks a method by size.
            flags.append("-mstringop-strategy=libcall")
        if "__AVX512F__" in macros and not any(f.startswith("-mprefer-vector-width") for f in flags):
            # With AVX-512 the compilers still vectorize loops with 256-bit vectors (their
            # tuning for the CPUs that slowed their clock for 512-bit ones); the node functions'
            # loops (softmax rows, depthwise convolutions, elementwise chains) then do half the
            # work an instruction. On a Sapphire Rapids: Softmax [12,197,197] 15% faster,
            # MobileNetV3-Large and EfficientNet-B0 3-4%, the same outputs.
            flags.append("-mprefer-vector-width=512")
        return flags

    def unit_flags(self) -> list[str]:
        """The flags of the model's own units and of the helper objects."""
        if "__clang__" in target_macros(self.cc, ()):   # (UNIT_OPT's flags are GCC's)
            return self.flags()
        return self.flags(UNIT_OPT.get(self.opt, ()))

    def graph_flags(self) -> list[str]:
        """The flags of a split build's graph unit (GRAPH_OPT)."""
        return self.flags(GRAPH_OPT)

    def simd(self) -> str:
        """The float32 SIMD family the generated code compiles to for this target (see
        c/helpers/simd.c.j2): "avx512f", "avx2", "neon" or "" for portable C."""
        return simd_family(self.cc, tuple(self.flags()))

    def isa(self) -> list[str]:
        """The CPU features the compiled code may use (cpuinfo spelling): ``-march=native``
        resolved to this machine's, a named ``-march`` to that CPU's."""
        return isa_features(self.cc, tuple(self.flags()))

    def identity(self) -> str:
        """What goes into the cache key: compiler version, flags (the helper objects' and the
        model's units') and the CPU features they resolve to (``-march=native`` builds differ
        from one CPU to the next)."""
        return f"{self.object_identity()}|units={' '.join(self.unit_flags())}|graph={' '.join(self.graph_flags())}"

    def object_identity(self) -> str:
        """What a helper object's cache key holds besides its source: compiler version, the
        flags it is built with and the CPU features they resolve to."""
        return f"{compiler_version(self.cc)}|{' '.join(self.unit_flags())}|isa={','.join(self.isa())}"

    def build_object(self, source: str, output: str) -> float:
        """Compiles a helper object's unit (``unit_flags()``, -c); returns the compiler's CPU seconds."""
        if shutil.which(self.cc) is None:
            raise CompileError(f"C compiler {self.cc!r} not found (set CC)")
        cpu = []
        _run_units([([self.cc, *self.unit_flags(), "-c", source, "-o", output], source)], 1,
                   lambda _name, _done, _seconds, seconds: cpu.append(seconds))
        return cpu[0]

    def build_shared(self, sources: list[str], output: str, jobs: int = 1,
                     on_unit: Optional[UnitCallback] = None, libraries: Optional[dict[str, str]] = None,
                     helpers: Sequence[HelperObject] = (), graph_unit: Optional[str] = None) -> None:
        """Builds the shared library ``output`` from C translation units and helper objects:
        one unit without helpers in one command; else the units compiled to objects, ``jobs``
        at a time with the helper objects the cache lacks, then linked. ``libraries``: the
        system libraries the code calls (codegen/system_libraries.py) -> the op that needs it.
        ``graph_unit``: the source of a split build's graph unit, built with ``graph_flags()``."""
        if shutil.which(self.cc) is None:
            raise CompileError(f"C compiler {self.cc!r} not found (set CC)")
        include, link = library_flags(self.cc, libraries or {})
        flags = self.unit_flags() + include
        link.append("-lm")
        if len(sources) == 1 and not helpers:
            _run_units([([self.cc, *flags, sources[0], "-o", output, *link], sources[0])], 1, on_unit)
            return
        with tempfile.TemporaryDirectory(prefix=".objects-", dir=os.path.dirname(output) or ".") as folder:
            units = [os.path.join(folder, f"{k}.o") for k in range(len(sources))]
            # (the biggest first: the last to finish is then a small one)
            order = sorted(range(len(sources)), key=lambda k: -os.path.getsize(sources[k]))
            graph = self.graph_flags() + include
            objects = _run_units([([self.cc, *(graph if sources[k] == graph_unit else flags), "-c", sources[k],
                                    "-o", units[k]], sources[k]) for k in order], jobs, on_unit, helpers)
            # The helper objects first: the GEMM's code then sits at the same place in every
            # model's library, and how fast its loops run (their alignment) does not change with
            # the size of the model's own units (up to 3% on EfficientNet-B0).
            _run_units([([self.cc, *flags, *objects, *units, "-o", output, *link], "")], 1, None)


@dataclass
class HelperObject:
    """A helper object a library links: ``get()`` returns its path and the compiler's CPU
    seconds, compiling it first (through the compile cache) when there is none, else 0."""
    source: str
    get: Callable[[], tuple[str, float]]


# on_unit(source, done, seconds, cpu_seconds): a translation unit was compiled, the done-th of
# the build, in this wall time and this CPU time of the compiler (0: a helper object the
# compile cache had, so nothing was compiled).
UnitCallback = Callable[[str, int, float, float], None]


def _run_units(commands: list[tuple[list[str], str]], jobs: int, on_unit: Optional[UnitCallback],
               helpers: Sequence[HelperObject] = ()) -> list[str]:
    """Runs compiler commands and gets helper objects (first, as those the cache has take no
    time), ``jobs`` at a time; returns the helper objects' paths, or raises CompileError with
    the first failure's output once the others have finished. A helper object the cache had
    is reported with no CPU time."""
    def run(cmd: list[str]) -> tuple[int, str, float, float]:
        start = time.perf_counter()
        with tempfile.TemporaryFile() as output:
            proc = subprocess.Popen(cmd, stdout=output, stderr=output, stdin=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)   # (its own CPU time, not the other jobs')
            proc.returncode = os.waitstatus_to_exitcode(status)
            output.seek(0)
            text = output.read().decode(errors="replace")
        return proc.returncode, text, time.perf_counter() - start, usage.ru_utime + usage.ru_stime

    paths: dict[int, str] = {}

    def get(k: int) -> tuple[int, str, float, float]:
        start = time.perf_counter()
        paths[k], cpu = helpers[k].get()
        return 0, "", time.perf_counter() - start, cpu

    failure: Optional[CompileError] = None
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(get, k): (None, h.source) for k, h in enumerate(helpers)}
        futures |= {pool.submit(run, cmd): (cmd, source) for cmd, source in commands}
        for future in concurrent.futures.as_completed(futures):
            cmd, source = futures[future]
            try:
                returncode, text, seconds, cpu = future.result()
            except CompileError as e:
                failure = failure or e
                continue
            if returncode != 0 and failure is None:
                failure = CompileError(f"{' '.join(cmd or [])} failed:\n{text[-8000:]}")
            done += 1
            if on_unit is not None and failure is None:
                on_unit(os.path.basename(source), done, seconds, cpu)
    if failure is not None:
        raise failure
    return [paths[k] for k in range(len(helpers))]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@functools.lru_cache(maxsize=None)
def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
        return out.splitlines()[0] if out else cc
    except (OSError, subprocess.SubprocessError):
        return cc


# Rows x columns of the float32 GEMM micro-kernel of each SIMD family (c/helpers/sgemm.c.j2):
# weights packed at compile time must match the tile the C compiler will pick.
GEMM_TILE = {"avx512f": (12, 32), "avx2": (6, 16), "neon": (12, 8), "": (4, 16)}


@functools.lru_cache(maxsize=None)
def target_macros(cc: str, flags: tuple[str, ...]) -> frozenset[str]:
    """The predefined macros of the C compiler with these target flags (empty if it fails)."""
    wanted = [f for f in flags if f.startswith(("-m", "-std"))]
    try:
        out = subprocess.run([cc, *wanted, "-dM", "-E", "-x", "c", os.devnull],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(line.split()[1] for line in out.splitlines() if line.startswith("#define "))


# The compiler's target macros of the instruction-set extensions that generated code can use
# (vector arithmetic, conversions, bit manipulation), and each one's /proc/cpuinfo flag. An
# artifact records these, and refuses to load on a CPU without them.
X86_FEATURE_MACROS = {
    "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1", "__SSE4_2__": "sse4_2",
    "__POPCNT__": "popcnt", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma", "__F16C__": "f16c",
    "__BMI__": "bmi1", "__BMI2__": "bmi2", "__LZCNT__": "abm", "__MOVBE__": "movbe",
    "__AVX512F__": "avx512f", "__AVX512CD__": "avx512cd", "__AVX512BW__": "avx512bw",
    "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl", "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BF16__": "avx512_bf16", "__AVX512FP16__": "avx512_fp16", "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi", "__AVX512VBMI2__": "avx512_vbmi2", "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq", "__AVXVNNI__": "avx_vnni",
    "__AMX_TILE__": "amx_tile", "__AMX_INT8__": "amx_int8", "__AMX_BF16__": "amx_bf16",
}


def isa_features(cc: str, flags: tuple[str, ...]) -> list[str]:
    """The CPU features (cpuinfo spelling) code compiled with these flags may use."""
    macros = target_macros(cc, flags)
    return sorted(flag for macro, flag in X86_FEATURE_MACROS.items() if macro in macros)


def simd_family(cc: str, flags: tuple[str, ...]) -> str:
    """The float32 SIMD family these flags target (see c/helpers/simd.c.j2)."""
    if "-DONNXC_NO_SIMD" in flags:
        return ""
    macros = target_macros(cc, flags)
    if "__AVX512F__" in macros:
        return "avx512f"
    if {"__AVX2__", "__FMA__"} <= macros:
        return "avx2"
    if {"__aarch64__", "__ARM_NEON"} <= macros:
        return "neon"
    return ""


def _nvcc() -> str:
    """nvcc: $NVCC, on PATH, or under $CUDA_HOME / /usr/local/cuda."""
    for candidate in (os.environ.get("NVCC"), shutil.which("nvcc"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if candidate and os.path.isfile(candidate):
            return candidate
    return "nvcc"


@dataclass
class CudaToolchain:
    """Builds a CUDA translation unit (model.cu) into a shared library with nvcc, for the GPU
    architectures ``archs``; or, with ``emulate``, with the host C++ compiler and the CUDA
    runtime emulated on the CPU (the kernels run one block and thread after another), which is
    how machines without a GPU test the CUDA build's code."""
    archs: tuple[str, ...] = ("sm_80", "sm_90")
    emulate: bool = False
    cxx: str = field(default_factory=lambda: os.environ.get("CXX", "g++"))
    nvcc: str = field(default_factory=_nvcc)

    def flags(self) -> list[str]:
        common = ["-O3", "-std=c++17", "-shared"]
        if self.emulate:
            return [*common, "-x", "c++", "-DONNXC_CUDA_EMULATE", *WARNINGS, "-fPIC", "-fvisibility=hidden",
                    "-fwrapv", "-fno-math-errno", "-fno-trapping-math"]
        # machine code for each architecture, and the newest one's PTX, which the driver compiles
        # for GPUs newer than any of them
        from ..runtime.cuda import newest_arch
        newest = newest_arch(self.archs)[3:]
        gencode = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in self.archs]
        gencode.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")
        # Warnings fail the build, but for one: nvcc's front end reports a local "set but never
        # used" (550) even after the C code's (void)x, which tells C compilers it is meant.
        return [*common, "-x", "cu", *gencode, "-Werror", "all-warnings", "--diag-suppress=550", "-Xcompiler",
                "-fPIC,-fvisibility=hidden,-fwrapv,-Wall,-Wextra"]

    def simd(self) -> str:
        return ""

    def isa(self) -> list[str]:
        return []   # host code built for the compiler's baseline

    def identity(self) -> str:
        compiler = self.cxx if self.emulate else self.nvcc
        return f"{compiler_version(compiler)}|{' '.join(self.flags())}"

    def check_flags(self) -> list[str]:
        """nvcc -c with the build's flags but without optimizing (host, NVVM and ptxas at -O0):
        every stage still runs and every diagnostic still fails it, at a tenth of the time
        (ptxas -O3 takes most of a build). How machines without a GPU check the CUDA source."""
        flags = [f for f in self.flags() if f not in ("-shared", "-O3")]
        return ["-O0", "-Xcicc", "-O0", "-Xptxas", "-O0", *flags, "-c"]

    def build_shared(self, sources: list[str], output: str, jobs: int = 1,
                     on_unit: Optional[UnitCallback] = None, libraries: Optional[dict[str, str]] = None,
                     helpers: Sequence[HelperObject] = (), graph_unit: Optional[str] = None) -> None:
        """Builds the one CUDA translation unit of ``sources`` (a CUDA build is never split and
        keeps its helpers in it: ``helpers`` is empty, there is no ``graph_unit``); ``libraries``
        as for :meth:`Toolchain.build_shared` (host code calls them)."""
        [source] = sources
        if helpers or graph_unit:
            raise ValueError("CUDA builds are one unit and link no helper objects")
        compiler = self.cxx if self.emulate else self.nvcc
        include, link = library_flags(self.cxx, libraries or {})
        start, cpu = time.perf_counter(), _children_cpu()
        self._run([compiler, *self.flags(), *include, source, "-o", output, *link, "-lm"])
        if on_unit is not None:
            on_unit(os.path.basename(source), 1, time.perf_counter() - start, _children_cpu() - cpu)

    @staticmethod
    def _run(cmd: list[str]) -> None:
        if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
            raise CompileError(f"{cmd[0]!r} not found (the CUDA toolkit's nvcc, or set NVCC)")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"{' '.join(cmd)} failed:\n{(proc.stderr or proc.stdout)[-8000:]}")
