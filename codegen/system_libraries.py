"""System libraries that some kernels call (ImageDecoder's codecs): their headers and link flags,
found when a model that needs them is built, and only then.

A library is looked up through pkg-config where it knows it (include folders such as
``openjpeg-2.5`` differ between versions), else by its usual flags, and checked by compiling
and linking a program that includes its header: a machine without it gets an error naming
the library and the package that provides it, not the C compiler's output.
"""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Iterable

from ..compiler.errors import CompileError


@dataclass(frozen=True)
class SystemLibrary:
    header: str                   # what the generated code includes
    pkg_config: str               # pkg-config's name of it
    flags: tuple[str, ...]        # the compiler flags without pkg-config
    debian: str                   # the Debian package of its header and library


LIBRARIES = {
    "libjpeg": SystemLibrary("jpeglib.h", "libjpeg", ("-ljpeg",), "libjpeg-dev"),
    "libpng": SystemLibrary("png.h", "libpng", ("-lpng",), "libpng-dev"),
    "libwebp": SystemLibrary("webp/decode.h", "libwebp", ("-lwebp",), "libwebp-dev"),
    "libtiff": SystemLibrary("tiffio.h", "libtiff-4", ("-ltiff",), "libtiff-dev"),
    "libopenjp2": SystemLibrary("openjpeg.h", "libopenjp2", ("-I/usr/include/openjpeg-2.5", "-lopenjp2"),
                                "libopenjp2-7-dev"),
}


def library_flags(cc: str, needed: dict[str, str]) -> tuple[list[str], list[str]]:
    """The compile flags (include folders) and link flags of the libraries ``needed`` (name ->
    the op that needs it), in order; raises CompileError naming each one ``cc`` cannot build with."""
    names = list(needed)
    missing = missing_libraries(cc, names)
    if missing:
        raise CompileError("the model needs system libraries this machine lacks: "
                           + ", ".join(f"{n} for {needed[n]} (header {LIBRARIES[n].header}, Debian package "
                                       f"{LIBRARIES[n].debian})" for n in missing))
    cflags: list[str] = []
    ldflags: list[str] = []
    for name in names:
        for flag in _flags(cc, name) or ():
            target = ldflags if flag.startswith(("-l", "-L", "-Wl,")) else cflags
            if flag not in target:
                target.append(flag)
    return cflags, ldflags


def missing_libraries(cc: str, names: Iterable[str]) -> list[str]:
    """Those of the libraries ``names`` that ``cc`` cannot build and link a program with."""
    return [name for name in names if _flags(cc, name) is None]


@functools.lru_cache(maxsize=None)
def _flags(cc: str, name: str) -> tuple[str, ...] | None:
    """The flags that build and link a program including the library's header, or None."""
    lib = LIBRARIES[name]
    flags = _pkg_config(lib.pkg_config) or lib.flags
    program = f"#include <stddef.h>\n#include <stdio.h>\n#include <{lib.header}>\nint main(void) {{ return 0; }}\n"
    with tempfile.TemporaryDirectory(prefix="onnxc-probe-") as folder:
        source = os.path.join(folder, "probe.c")
        with open(source, "w", encoding="utf-8") as f:
            f.write(program)
        try:
            proc = subprocess.run([cc, source, "-o", os.path.join(folder, "probe"), *flags],
                                  capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
    return flags if proc.returncode == 0 else None


def _pkg_config(module: str) -> tuple[str, ...]:
    if shutil.which("pkg-config") is None:
        return ()
    try:
        proc = subprocess.run(["pkg-config", "--cflags", "--libs", module], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(shlex.split(proc.stdout)) if proc.returncode == 0 else ()
