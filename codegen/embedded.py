"""The freestanding source package of ``onnxc compile --target c``: the model as C99 that
allocates nothing, with its weights as constant arrays, a Makefile, a CMakeLists.txt, an
example program and a README that states the sizes. Its files are named after the prefix
(``--name``): ``kws.c``, ``kws.h``, ``kws_weights.c``, so packages share a folder or a firmware.

The package is checked here before it is handed over: the model's sources must compile with
the host's C compiler under ``-std=c99 -Wall -Wextra -Wpedantic -Wconversion -Werror
-ffreestanding``, and that object's code size goes into the README.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import re
from typing import Any

from ..compiler.errors import CompileError
from .c_emitter import CModel
from .names import comment
from .templates import render

# The flags a package must build with (its Makefile uses them too).
STRICT_CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Werror", "-ffreestanding"]
# Only these headers (and the package's own) may appear in the model's own sources.
ALLOWED_HEADERS = frozenset({"stdint.h", "stddef.h", "string.h", "math.h"})
PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


def check_prefix(prefix: str) -> None:
    """The prefix names C symbols, macros and files: a C identifier of at most 32 characters."""
    if not isinstance(prefix, str) or not PREFIX.fullmatch(prefix):
        raise ValueError(f"prefix {prefix!r}: a C identifier of at most 32 characters")


def file_names(prefix: str) -> dict[str, str]:
    """The package's files by role: the model's source and header, the weights as C or as
    raw bytes, the example program."""
    return {"source": f"{prefix}.c", "header": f"{prefix}.h", "weights_c": f"{prefix}_weights.c",
            "weights_bin": f"{prefix}_weights.bin", "demo": f"{prefix}_demo.c"}


def _print_spec(dtype: str, ctype: str) -> tuple[str, str]:
    """printf format and cast of one output element in the example program."""
    if ctype in ("float", "double"):
        return ("%.9g" if ctype == "float" else "%.17g"), "(double)"
    if dtype == "bfloat16":
        return "%.9g", "bf16_value"
    if dtype.startswith("int"):
        return "%lld", "(long long)"
    return "%llu", "(unsigned long long)"


def write_package(model: CModel, output_dir: str, command: str, version: str, title: str,
                  cc: str | None = None) -> dict[str, Any]:
    """Writes the package into ``output_dir`` and returns its description (sizes, files)."""
    prefix = model.prefix
    banner = {"command": comment(command), "version": comment(version), "graph": comment(title)}

    def io(items: list[dict[str, Any]], header_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for info, h in zip(items, header_items):
            fmt, cast = _print_spec(info["dtype"], h["ctype"])
            out.append({**h, "format": fmt, "cast": cast, "display": comment(info["name"]).replace("`", "'")})
        return out

    ins, outs = io(model.inputs, model.extra["inputs"]), io(model.outputs, model.extra["outputs"])
    weights_bin = not model.weights_source
    names = file_names(prefix)
    cmsis_nn = bool(model.extra.get("cmsis_nn"))
    common = {"banner": banner, "prefix": prefix, "PREFIX": prefix.upper(), "weights_bin": weights_bin,
              "files": names, "cmsis_nn": cmsis_nn}
    files = {names["source"]: model.source, names["header"]: model.header,
             names["demo"]: render("c/embedded/main.c.j2", {**common, "inputs": ins, "outputs": outs}),
             "Makefile": render("c/embedded/Makefile.j2", common),
             "CMakeLists.txt": render("c/embedded/CMakeLists.txt.j2", common)}
    if not weights_bin:
        files[names["weights_c"]] = model.weights_source
    os.makedirs(output_dir, exist_ok=True)
    for name, text in files.items():
        _write(os.path.join(output_dir, name), text)
    if weights_bin:
        with open(os.path.join(output_dir, names["weights_bin"]), "wb") as f:
            f.write(model.weights)
        files[names["weights_bin"]] = ""
    cc = cc or os.environ.get("CC", "cc")
    sources = [names["source"]] + ([] if weights_bin else [names["weights_c"]])
    if cmsis_nn:   # (the model's source needs CMSIS-NN's headers, which the build names)
        if sources[1:]:
            _check_and_measure(cc, output_dir, sources[1:], names["header"])
        code_bytes, size_command = "n/a", "not measured: the code calls CMSIS-NN"
    else:
        code_bytes, size_command = _check_and_measure(cc, output_dir, sources, names["header"])
    readme = render("c/embedded/README.md.j2", {
        **common, "title": comment(title), "version": comment(version),
        "command": comment(command), "arena_bytes": model.arena_bytes, "weights_bytes": model.weights_bytes,
        "code_bytes": code_bytes, "size_command": size_command, "inputs": ins, "outputs": outs,
        "notes": model.extra.get("notes", [])})
    _write(os.path.join(output_dir, "README.md"), readme)
    return {"target": "c", "prefix": prefix, "arena_bytes": model.arena_bytes,
            "weights_bytes": model.weights_bytes, "code_bytes": code_bytes,
            "files": sorted([*files, "README.md"])}


def _write(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _check_and_measure(cc: str, folder: str, sources: list[str], header: str) -> tuple[int | str, str]:
    """Compiles the model's sources (the model, its weights) with STRICT_CFLAGS (a failure is a
    CompileError: the package would not build); returns the model's code bytes (text) at -Os
    and how they were read."""
    if shutil.which(cc) is None:
        raise CompileError(f"C compiler {cc!r} not found (set CC)")
    with tempfile.TemporaryDirectory(prefix="onnxc-pkg-") as tmp:
        objects = {}
        for name in sources:
            # the headers the preprocessor actually opens (-H: one dot per nesting level)
            proc = subprocess.run([cc, *STRICT_CFLAGS, "-E", "-H", os.path.join(folder, name), "-o", os.devnull],
                                  capture_output=True, text=True)
            direct = {os.path.basename(line[2:].strip()) for line in proc.stderr.splitlines() if line.startswith(". ")}
            if proc.returncode != 0 or not direct - {header} <= ALLOWED_HEADERS:
                raise CompileError(f"internal: {name} includes {sorted(direct - ALLOWED_HEADERS - {header})} "
                                   f"{proc.stderr[-2000:] if proc.returncode else ''}")
            obj = os.path.join(tmp, f"{len(objects)}.o")
            cmd = [cc, "-Os", *STRICT_CFLAGS, "-c", os.path.join(folder, name), "-o", obj]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise CompileError(f"{' '.join(cmd)} failed:\n{proc.stderr[-8000:]}")
            objects[name] = obj
        size = shutil.which("size")
        if size is None:
            return "n/a", "no size tool"
        proc = subprocess.run([size, objects[sources[0]]], capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or len(lines) < 2:
            return "n/a", "size failed"
        return int(lines[1].split()[0]), f"{os.path.basename(cc)} -Os, size {sources[0][:-2]}.o: text"
