"""ONNX node conformance cases through ``--target c``: the freestanding package is written
(its case.c and case_weights.c compile under -std=c99 -Wpedantic -Wconversion -Werror, which
``write_package`` checks), its example program is built, runs on the case's inputs given
as raw files, and prints the outputs, which are compared like run_case compares them."""
from __future__ import annotations

import os
import subprocess
from typing import Any

import numpy as np

from .cases import Mismatch, _as_array, _compare, read_expected_failures

PACKAGE_REFUSALS = os.path.join(os.path.dirname(__file__), "expected_package_refusals.txt")
ALLOCATOR = {"malloc", "calloc", "realloc", "free"}


def package_refusals() -> dict[str, str]:
    """case name -> why ``--target c`` refuses it, from expected_package_refusals.txt."""
    return read_expected_failures(PACKAGE_REFUSALS)


def run_case_embedded(case: Any, workdir: str) -> None:
    """Raises onnxc.UnsupportedError where the model cannot be a package (run-time sizes,
    strings, sequences), Mismatch or AssertionError on a wrong result."""
    exe = build_case_package(case, workdir)
    output_names = [o.name for o in case.model.graph.output]
    for inputs, outputs in case.data_sets:
        files = write_case_inputs(case, inputs, workdir)
        run = subprocess.run([exe, *files], capture_output=True, text=True, timeout=300, cwd=workdir)
        if run.returncode != 0:
            raise Mismatch(f"the example program failed: {run.stderr.strip()[-500:]}")
        for name, expected, got in zip(output_names, outputs, parse_printed(run.stdout, outputs)):
            _compare(name, np.asarray(_as_array(expected)), got, case.rtol, case.atol)


def build_case_package(case: Any, workdir: str) -> str:
    """Writes the case's package (prefix ``case``) into ``workdir`` and builds its example
    program for the host; returns the program's path."""
    from onnxc.driver import CompileOptions, compile_model
    compile_model(case.model, workdir, CompileOptions(target="c", prefix="case"), command=f"onnxc compile {case.name}")
    exe, obj = os.path.join(workdir, "demo"), os.path.join(workdir, "case.o")
    build = subprocess.run(["cc", "-O1", "-std=c99", "-w", "-c", "-o", obj, os.path.join(workdir, "case.c")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    # the model's code allocates nothing (Kernel.allocates refuses the kernels that would)
    needed = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout.split()[1::2]
    assert not ALLOCATOR & set(needed), f"case.c calls {sorted(ALLOCATOR & set(needed))}"
    build = subprocess.run(["cc", "-O1", "-std=c99", "-w", "-o", exe, obj, *(os.path.join(workdir, f) for f in
                            ("case_demo.c", "case_weights.c")), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    return exe


def write_case_inputs(case: Any, inputs: list, workdir: str) -> list[str]:
    """One data set's inputs as raw files in ``workdir``; returns their names (relative)."""
    initializers = {i.name for i in case.model.graph.initializer}
    input_names = [i.name for i in case.model.graph.input if i.name not in initializers]
    if len(inputs) != len(input_names):
        raise Mismatch(f"case feeds {len(inputs)} inputs, model declares {len(input_names)}")
    names = []
    for i, value in enumerate(inputs):
        names.append(f"input{i}.bin")
        with open(os.path.join(workdir, names[-1]), "wb") as f:
            f.write(np.ascontiguousarray(np.asarray(_as_array(value))).tobytes())
    return names


def parse_printed(stdout: str, expected: list) -> list[np.ndarray]:
    """What the example program printed, as arrays shaped and typed like the expected outputs;
    Mismatch when it printed another number of outputs or of elements."""
    printed = _printed(stdout)
    if len(printed) != len(expected):
        raise Mismatch(f"the example program printed {len(printed)} outputs, the model has {len(expected)}")
    return [_parse(text, np.asarray(_as_array(e))) for text, e in zip(printed, expected)]


def _printed(stdout: str) -> list[list[str]]:
    outputs: list[list[str]] = []
    for line in stdout.splitlines():
        if line.startswith("# output"):
            outputs.append([])
        elif line.strip() and not line.startswith("#"):
            if not outputs:
                raise Mismatch(f"the example program printed {line!r} before its first output")
            outputs[-1].append(line.strip())
    return outputs


def _parse(text: list[str], like: np.ndarray) -> np.ndarray:
    """The printed elements as an array of the expected output's dtype and shape: floats and
    bfloat16 as values, integers exactly, other narrow types as their stored bits."""
    dtype = like.dtype
    if dtype.kind == "f" and dtype.itemsize >= 4:
        values = np.array([float(t) for t in text], dtype)
    elif dtype.kind in "iub" and dtype.itemsize > 0 and dtype.name in np.sctypeDict:
        values = np.array([int(t) for t in text]).astype(dtype)
    elif dtype.name == "bfloat16":
        values = np.array([float(t) for t in text], np.float32).astype(dtype)
    else:  # float8, float4, int4 and int2 (ml_dtypes): one stored byte each
        values = np.array([int(t) for t in text], np.uint8).view(dtype)
    if values.size != like.size:
        raise Mismatch(f"{values.size} elements printed, {like.size} expected")
    return values.reshape(like.shape)
