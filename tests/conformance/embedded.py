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


def package_refusals() -> dict[str, str]:
    """case name -> why ``--target c`` refuses it, from expected_package_refusals.txt."""
    return read_expected_failures(PACKAGE_REFUSALS)


def run_case_embedded(case: Any, workdir: str) -> None:
    """Raises onnxc.UnsupportedError where the model cannot be a package (run-time sizes,
    strings, sequences), Mismatch or AssertionError on a wrong result."""
    from onnxc.driver import CompileOptions, compile_model
    compile_model(case.model, workdir, CompileOptions(target="c", prefix="case"), command=f"onnxc compile {case.name}")
    exe = os.path.join(workdir, "demo")
    build = subprocess.run(["cc", "-O1", "-std=c99", "-w", "-o", exe, *(os.path.join(workdir, f) for f in
                            ("case_demo.c", "case.c", "case_weights.c")), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    initializers = {i.name for i in case.model.graph.initializer}
    input_names = [i.name for i in case.model.graph.input if i.name not in initializers]
    output_names = [o.name for o in case.model.graph.output]
    for inputs, outputs in case.data_sets:
        paths = []
        for i, value in enumerate(inputs):
            path = os.path.join(workdir, f"input{i}.bin")
            with open(path, "wb") as f:
                f.write(np.ascontiguousarray(np.asarray(_as_array(value))).tobytes())
            paths.append(path)
        if len(paths) != len(input_names):
            raise Mismatch(f"case feeds {len(paths)} inputs, model declares {len(input_names)}")
        run = subprocess.run([exe, *paths], capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise Mismatch(f"the example program failed: {run.stderr.strip()[-500:]}")
        printed = _printed(run.stdout)
        if len(printed) != len(output_names):
            raise Mismatch(f"the example program printed {len(printed)} outputs, the model has {len(output_names)}")
        for name, expected, text in zip(output_names, outputs, printed):
            expected = np.asarray(_as_array(expected))
            _compare(name, expected, _parse(text, expected), case.rtol, case.atol)


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
