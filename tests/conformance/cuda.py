"""ONNX node conformance cases through the CUDA build.

Without a GPU two checks remain, and both run here: the CUDA source of each case is compiled by
nvcc (many cases to one translation unit, each in a namespace of its own, as one nvcc run per
case would take an hour), with warnings as errors; and the same source is built with the host
C++ compiler with the CUDA runtime emulated (``ONNXC_CUDA_EMULATE``) and run on the case's
inputs. With a GPU, ``run_case(..., target="cuda")`` runs it there.
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Sequence

# what every case's source includes, once, before the namespaces (their own includes are then no-ops)
_HEADERS = ["cuda_fp16.h", "cuda_runtime.h", "mma.h", "functional", "math.h", "mutex", "stddef.h", "stdint.h", "stdlib.h", "string.h", "vector"]


def cuda_sources(cases: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    """The CUDA translation unit of each case that the CUDA build takes, and the reason of
    each it refuses (onnxc.UnsupportedError)."""
    import onnxc
    from onnxc.driver import CompileOptions, generate_source
    sources, refused = [], {}
    for i, case in enumerate(cases):
        try:
            sources.append(generate_source(case.model, CompileOptions(target="cuda", prefix=f"case{i}"),
                                           command=f"onnxc compile {case.name}").source)
        except onnxc.UnsupportedError as e:
            refused[case.name] = str(e)
    return sources, refused


def one_unit(sources: Sequence[str]) -> str:
    """Sources in one translation unit: each in a namespace, its macros undefined after it."""
    parts = [f"#include <{h}>\n" for h in _HEADERS + _system_headers(sources)]
    for i, src in enumerate(sources):
        macros = sorted(m for m in set(re.findall(r"^\s*#\s*define\s+(\w+)", src, re.M)) if not m.startswith("__"))
        parts.append(f"namespace onnxc_case{i} {{\n{src}\n}}  // namespace onnxc_case{i}\n")
        parts.extend(f"#undef {m}\n" for m in macros)
    return "".join(parts)


def nvcc_compile(sources: Sequence[str], workdir: str, archs: tuple[str, ...] = ("sm_80",)) -> None:
    """nvcc -c of the sources (one unit) with the CUDA build's flags; AssertionError with
    nvcc's messages if it fails."""
    from onnxc.codegen.system_libraries import LIBRARIES, library_flags
    from onnxc.codegen.toolchain import CudaToolchain
    path = os.path.join(workdir, "cases.cu")
    with open(path, "w") as f:
        f.write(one_unit(sources))
    tc = CudaToolchain(archs=archs)
    include, _ = library_flags(tc.cxx, {name: "a case" for name, lib in LIBRARIES.items()
                                        if lib.header in _system_headers(sources)})
    cmd = [tc.nvcc, *tc.check_flags(), *include, path, "-o", os.path.join(workdir, "cases.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stderr or proc.stdout)[-6000:]


def _system_headers(sources: Sequence[str]) -> list[str]:
    """The headers of system libraries the sources include (ImageDecoder's codecs, with the C
    headers they need first): included once before the namespaces too."""
    from onnxc.codegen.system_libraries import LIBRARIES
    wanted = {lib.header for lib in LIBRARIES.values()}
    found = {h for src in sources for h in re.findall(r"^#include <([^>]+)>", src, re.M) if h in wanted}
    if not found:
        return []
    return ["setjmp.h", "stdio.h", *sorted(found)] + (["jerror.h"] if "jpeglib.h" in found else [])

