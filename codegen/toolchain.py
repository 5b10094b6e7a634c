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
        flags = [self.opt, "-std=c11", *WARNINGS, "-fPIC", "-shared", "-fvisibility=hidden",
                 "-fwrapv", "-fno-math-errno"]
        if self.march:
            flags.append(f"-march={self.march}")
        return flags + list(self.extra)

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
