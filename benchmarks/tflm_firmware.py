"""TensorFlow Lite Micro as firmware for QEMU's emulated boards (onnxc.benchmarks.mcu): TFLM's C++
built from its source for the board, a model's .tflite flatbuffer linked in as a constant array
(in flash, like a package's weights), run by ``firmware/tflm_main.cc``.

The source is a TFLM checkout given by the caller (``footprint --tflm-source DIR``) with the
third-party headers TFLM's Makefile downloads in ``tensorflow/lite/micro/tools/make/downloads/``
(``flatbuffers``, ``gemmlowp``, ``ruy``: ``make -f tensorflow/lite/micro/tools/make/Makefile
third_party_downloads``). Only the interpreter and the kernels the footprint models use are
compiled, with TFLM's release flags (``-DNDEBUG -DTF_LITE_STRIP_ERROR_STRINGS``, the framework
at ``-Os``, the kernels at ``-O2``, as its Makefile builds them) and its portable reference
kernels (no CMSIS-NN).

Measured: TFLM's code (the text and read-only data the linked firmware takes from TFLM's
objects, from the linker's map: the interpreter and the kernels of the model's operators,
which tflm_main.cc registers; like a package's example program, it is left out), the arena
the interpreter used on the board (``arena_used_bytes``: 32-bit pointers) and the instructions
of one ``Invoke``.
"""
from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from . import mcu

MICRO = "tensorflow/lite/micro"
FRAMEWORK = [
    *(f"{MICRO}/{name}.cc" for name in (
        "debug_log", "flatbuffer_utils", "memory_helpers", "micro_allocation_info", "micro_allocator",
        "micro_context", "micro_interpreter", "micro_interpreter_context", "micro_interpreter_graph", "micro_log",
        "micro_op_resolver", "micro_profiler", "micro_resource_variable", "micro_utils",
        "arena_allocator/non_persistent_arena_buffer_allocator", "arena_allocator/persistent_arena_buffer_allocator",
        "arena_allocator/single_arena_buffer_allocator", "memory_planner/greedy_memory_planner",
        "memory_planner/linear_memory_planner", "memory_planner/non_persistent_buffer_planner_shim",
        "tflite_bridge/flatbuffer_conversions_bridge", "tflite_bridge/micro_error_reporter")),
    *(f"tensorflow/lite/{name}.cc" for name in (
        "core/api/flatbuffer_conversions", "core/api/tensor_utils", "core/c/common", "kernels/kernel_util",
        "kernels/internal/common", "kernels/internal/portable_tensor_utils", "kernels/internal/quantization_util",
        "kernels/internal/runtime_shape", "kernels/internal/tensor_ctypes", "kernels/internal/tensor_utils",
        "kernels/internal/reference/portable_tensor_utils")),
    "tensorflow/compiler/mlir/lite/schema/schema_utils.cc",
]
KERNELS = [f"{MICRO}/kernels/{name}.cc" for name in (
    "activations", "activations_common", "conv", "conv_common", "depthwise_conv", "depthwise_conv_common",
    "dequantize", "dequantize_common", "fully_connected", "fully_connected_common", "kernel_util",
    "micro_tensor_utils", "pad", "pad_common", "pooling", "pooling_common", "quantize", "quantize_common",
    "reduce", "reduce_common", "reshape", "reshape_common")]
DOWNLOADS = f"{MICRO}/tools/make/downloads"
CXXFLAGS = ["-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics", "-fno-unwind-tables",
            "-fno-asynchronous-unwind-tables", "-ffunction-sections", "-fdata-sections", "-DTF_LITE_STATIC_MEMORY",
            "-DNDEBUG", "-DTF_LITE_STRIP_ERROR_STRINGS"]


def includes(source: str) -> list[str]:
    missing = [d for d in ("flatbuffers/include", "gemmlowp", "ruy") if not os.path.isdir(os.path.join(source, DOWNLOADS, d))]
    if not os.path.isfile(os.path.join(source, MICRO, "micro_interpreter.cc")) or missing:
        raise FileNotFoundError(f"{source} is not a TFLM checkout with {DOWNLOADS}/flatbuffers, gemmlowp and ruy "
                                f"(missing: {', '.join(missing) or MICRO})")
    return ["-I", source, "-I", os.path.join(source, DOWNLOADS, "flatbuffers/include"),
            "-I", os.path.join(source, DOWNLOADS, "gemmlowp"), "-I", os.path.join(source, DOWNLOADS, "ruy")]


def _compile(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")


def build_library(source: str, board: str, library_dir: str, jobs: int = 2) -> list[str]:
    """TFLM's objects for ``board`` under ``library_dir`` (those already there are kept)."""
    flags = [*mcu.BOARDS[board].cflags, *CXXFLAGS, *includes(source)]
    objects, commands = [], []
    for src in FRAMEWORK + KERNELS:
        obj = os.path.join(library_dir, board, src[:-3] + ".o")
        objects.append(obj)
        if not os.path.exists(obj):
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            level = "-O2" if src in KERNELS else "-Os"
            commands.append(["arm-none-eabi-g++", *flags, level, "-c", os.path.join(source, src), "-o", obj])
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(_compile, commands))
    return objects


def _model_source(flatbuffer: bytes, path: str) -> None:
    """The flatbuffer as a C array in the weights' flash section, 16-byte aligned."""
    rows = (", ".join(str(b) for b in flatbuffer[i:i + 24]) for i in range(0, len(flatbuffer), 24))
    with open(path, "w", encoding="ascii") as f:
        f.write(f'__attribute__((section("{mcu.WEIGHTS_SECTION}"), aligned(16)))\n'
                "const unsigned char tflm_model[] = {\n" + ",\n".join(rows) + "\n};\n")


def code_bytes(map_file: str, objects: list[str]) -> int:
    """Bytes of text and read-only data the link took from ``objects`` (the linker's map)."""
    with open(map_file, encoding="utf-8", errors="replace") as f:
        text = f.read().partition("Linker script and memory map")[2]   # not the discarded sections before it
    ours = {os.path.abspath(o) for o in objects}
    total = 0
    for m in re.finditer(r"^ (\.(?:text|rodata)\S*)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.o)$", text, re.M):
        if os.path.abspath(m.group(3)) in ours:
            total += int(m.group(2), 16)
    return total


def operators(flatbuffer: bytes) -> list[str]:
    """The builtin operators ``flatbuffer`` uses, by their schema names (CONV_2D, ...)."""
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb
    model = fb.Model.GetRootAs(flatbuffer, 0)
    names = {code: name for name, code in vars(fb.BuiltinOperator).items() if not name.startswith("_")}
    return sorted(names[max(model.OperatorCodes(i).BuiltinCode(), model.OperatorCodes(i).DeprecatedBuiltinCode())]
                  for i in range(model.OperatorCodesLength()))


def build_firmware(source: str, flatbuffer: bytes, board: str, workdir: str, library_dir: str,
                   arena_bytes: int) -> tuple[str, int]:
    """The firmware for ``board`` that runs ``flatbuffer`` (TFLM's objects in ``library_dir``);
    returns its ELF and TFLM's code bytes."""
    objects = build_library(source, board, library_dir)
    model_c, elf = os.path.join(workdir, "tflm_model.c"), os.path.join(workdir, f"tflm.{board}.elf")
    _model_source(flatbuffer, model_c)
    cflags = mcu.BOARDS[board].cflags
    main_o, model_o, startup_o = (os.path.join(workdir, f"{name}.{board}.o") for name in ("tflm_main", "tflm_model", "startup"))
    registered = ["-DTFLM_OPS", *(f"-DTFLM_OP_{name}" for name in operators(flatbuffer))]
    _compile(["arm-none-eabi-g++", *cflags, *CXXFLAGS, *includes(source), "-Os", f"-DTFLM_ARENA_BYTES={arena_bytes}",
              *registered, "-c", os.path.join(mcu.FIRMWARE, "tflm_main.cc"), "-o", main_o])
    _compile(["arm-none-eabi-gcc", *cflags, "-c", model_c, "-o", model_o])
    _compile(["arm-none-eabi-gcc", *cflags, "-Os", "-std=c99", "-ffunction-sections", "-c",
              os.path.join(mcu.FIRMWARE, "startup.c"), "-o", startup_o])
    _compile(["arm-none-eabi-g++", *cflags, startup_o, main_o, model_o, *objects,
              "--specs=rdimon.specs", "-nostartfiles", "-T",
              os.path.join(mcu.FIRMWARE, mcu.BOARDS[board].linker_script),
              "-Wl,--gc-sections", f"-Wl,-Map={elf}.map", "-o", elf, "-lm"])
    return elf, code_bytes(f"{elf}.map", objects)


def measure(source: str, flatbuffer: bytes, inputs: list[np.ndarray], expected: list[np.ndarray],
            workdir: str, library_dir: str) -> dict[str, Any]:
    """TFLM on each board of the footprint tables: code bytes, arena bytes and instructions of one
    inference, and whether the outputs equal ``expected`` (TFLM's on this host) to rtol 1e-4
    (int8 ones exactly)."""
    names = []
    for i, x in enumerate(inputs):
        names.append(f"tflm_input{i}.bin")
        (x.transpose(0, 2, 3, 1) if x.ndim == 4 else x).astype(x.dtype).tofile(os.path.join(workdir, names[-1]))
    row: dict[str, Any] = {}
    for board in mcu.FOOTPRINT_BOARDS:
        try:
            elf, code = build_firmware(source, flatbuffer, board, workdir, library_dir, arena_bytes=1 << 20)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:   # a board's failure is its cells
            row[f"tflm_{board}"] = f"build failed: {str(e).splitlines()[0][:160]}"
            continue
        run = mcu.run_firmware(elf, board, names, cwd=workdir, timeout=1200)
        if run.returncode != 0 or run.instructions is None:
            row[f"tflm_{board}"] = f"failed: {(run.stdout + run.stderr).strip()[-160:]}"
            continue
        arena = re.search(r"^# arena (\d+)$", run.stdout, re.M)
        printed = [line for line in run.stdout.splitlines() if line and not line.startswith("#")]
        want = np.concatenate([e.ravel() for e in expected]) if expected else np.zeros(0)
        got = np.array([float(v) for v in printed])
        same = got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want)))))
        row.update({f"tflm_{board}_code_bytes": code, f"tflm_{board}_arena_bytes": int(arena.group(1)) if arena else None,
                    f"tflm_{board}_instructions": run.instructions, f"tflm_{board}_matches_host": same})
    return row
