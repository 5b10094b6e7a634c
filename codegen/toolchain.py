"""Building generated C with the system compiler."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from ..compiler.errors import CompileError

# Warnings are bugs in generated code, so they fail the build.
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


@dataclass
class Toolchain:
    cc: str = field(default_factory=lambda: os.environ.get("CC", "cc"))
    opt: str = "-O3"
    march: str = "native"
    extra: list[str] = field(default_factory=list)

    def flags(self) -> list[str]:
        # -fno-math-errno and -fno-trapping-math change no value: they let math calls become
        # instructions and float selects (clamps, NaN checks) become vector blends, so loops
        # over onnxc_expf / onnxc_tanhf / onnxc_erff vectorize. -ffp-contract=fast (the
        # default of GNU C, off under -std=c11) lets a * b + c be one fused multiply-add where
        # the target has one, as onnxruntime's kernels compute: polynomials and epilogues take
        # fewer instructions and round once.
        flags = [self.opt, "-std=c11", *WARNINGS, "-fPIC", "-shared", "-fvisibility=hidden",
                 "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast"]
        if self.march:
            flags.append(f"-march={self.march}")
        flags += list(self.extra)
        if target_macros(self.cc, tuple(flags)) & {"__x86_64__", "__i386__"}:
            # gcc expands copies of unknown length (im2col rows, state copies) inline as
            # `rep movs`, whose start-up cost dwarfs copies of tens of bytes; libc's memcpy
            # picks a method by size.
            flags.append("-mstringop-strategy=libcall")
        return flags

    def simd(self) -> str:
        """The float32 SIMD family the generated code compiles to for this target (see
        c/helpers/simd.c.j2): "avx512f", "avx2", "neon" or "" for portable C."""
        return simd_family(self.cc, tuple(self.flags()))

    def identity(self) -> str:
        """What goes into the cache key: compiler version and flags."""
        return f"{compiler_version(self.cc)}|{' '.join(self.flags())}"

    def build_shared(self, source: str, output: str) -> None:
        cmd = [self.cc, *self.flags(), source, "-o", output, "-lm"]
        if shutil.which(self.cc) is None:
            raise CompileError(f"C compiler {self.cc!r} not found (set CC)")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"{' '.join(cmd)} failed:\n{proc.stderr[-8000:]}")


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
