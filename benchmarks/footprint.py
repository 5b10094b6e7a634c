"""Footprint of ``onnxc compile --target c`` packages on a Cortex-M4: arena, weights and code
bytes for a few models of the sizes microcontrollers run.

    python -m onnxc.benchmarks.footprint            # prints a Markdown table
    python -m onnxc.benchmarks.footprint --json build/footprint.json
    python -m onnxc.benchmarks.footprint --tflm     # and TensorFlow Lite Micro next to onnxc
    python -m onnxc.benchmarks.footprint --cmsis-nn tests/third_party/cmsis_nn   # int8: requantizations, CMSIS-NN

Each model's package (``--name net``) is written to a temporary folder; net.c and net_weights.c
are compiled with ``arm-none-eabi-gcc -Os -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16``
(Debian's gcc-arm-none-eabi) and measured with arm-none-eabi-size: code is net.o's text,
weights are net_weights.o's (constant data, in flash), the arena is the header's
``<NAME>_ARENA_BYTES`` (RAM). Without the cross compiler the code column says so. The
instructions of one inference are counted on QEMU's emulated boards (onnxc.benchmarks.mcu): the
package's example program as Cortex-M4F firmware on mps2-an386, and as Cortex-M0+ code
(ARMv6-M, soft float) on mps2-an385, both -Os.

With ``--tflm`` a second table puts TensorFlow Lite Micro next to onnxc: the same models as
.tflite flatbuffers, run by the ``tflite-micro`` package's interpreter (onnxc.benchmarks.tflm,
``pip install onnxc[bench]``), for its model and arena bytes; with ``--tflm-source DIR`` (a TFLM
source tree) also TFLM built as firmware for the same boards (onnxc.benchmarks.tflm_firmware),
for its code, arena and instructions per inference.

With ``--cmsis-nn DIR`` it measures the int8 models instead, each with float and fixed-point
requantization and with CMSIS-NN's kernels (``--cmsis-nn``, CMSIS-NN's sources in DIR built
with the package for the Cortex-M4F): instructions of one inference on the board, the
firmware's text (newlib included) and the arena; and the instructions with fixed point and
with CMSIS-NN on the Cortex-M55 board (mps3-an547), where CMSIS-NN runs its Helium code.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np
import onnx

from . import mcu, tflm
from .builder import GraphBuilder
from .models import mlp, tiny_cnn

CPU = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
CROSS = "arm-none-eabi-gcc"


def kws_dscnn(seed: int = 0) -> onnx.ModelProto:
    """A keyword-spotting DS-CNN (the "small" network of Hello Edge, Zhang et al. 2017): 49 x 10
    MFCC features, a 10x4 stride-2 convolution to 64 channels, four depthwise-separable blocks
    (3x3 depthwise + 1x1 pointwise, each with BatchNormalization and ReLU), average pooling and
    a 12-way classifier."""
    b = GraphBuilder(seed)

    def bn_relu(x: str, c: int) -> str:
        scale, bias = b.uniform(0.5, 1.5, c), b.normal(0.1, c)
        mean, var = b.normal(0.1, c), b.uniform(0.5, 1.5, c)
        return b.op("Relu", [b.op("BatchNormalization", [x, scale, bias, mean, var])])

    x = b.op("Conv", ["mfcc", b.he_weight(64, 1, 10, 4), b.normal(0.1, 64)], kernel_shape=[10, 4],
             strides=[2, 2], pads=[5, 1, 4, 2])
    x = bn_relu(x, 64)
    for _ in range(4):
        x = bn_relu(b.op("Conv", [x, b.he_weight(64, 1, 3, 3)], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=64), 64)
        x = bn_relu(b.op("Conv", [x, b.he_weight(64, 64, 1, 1)], kernel_shape=[1, 1]), 64)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    x = b.op("Gemm", [x, b.he_weight(12, 64), b.normal(0.1, 12)], transB=1)
    b.output(x, "scores")
    return b.model("kws_dscnn", [onnx.helper.make_tensor_value_info("mfcc", onnx.TensorProto.FLOAT, [1, 1, 49, 10])],
                   [onnx.helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [1, 12])])


def quantize_qdq(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> onnx.ModelProto:
    """``model`` through onnxruntime's static quantizer, calibrated on ``feeds``: QDQ, int8
    weights (symmetric) and activations."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(feeds)

        def get_next(self):
            return next(self.items, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, src)
        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8)
        return onnx.load(dst)


def int8_cnn() -> onnx.ModelProto | None:
    """The tiny CNN quantized by onnxruntime's static quantizer (QDQ, int8 weights and
    activations), or None without onnxruntime."""
    try:
        import onnxruntime.quantization  # noqa: F401
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    return quantize_qdq(tiny_cnn(), [{"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(8)])


def _calibrated(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model`` through onnxruntime's quantizer, calibrated on eight random feeds (standard
    normal times 2, seeds 0 to 7, as tests/test_cmsis_nn.py makes them), or None without it."""
    try:
        import onnxruntime.quantization  # noqa: F401
    except ImportError:
        return None
    feeds = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        feeds.append({v.name: (rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]) * 2)
                      .astype(np.float32) for v in model.graph.input})
    return quantize_qdq(model, feeds)


def int8_kws_dscnn() -> onnx.ModelProto | None:
    return _calibrated(kws_dscnn())


def int8_mlp() -> onnx.ModelProto | None:
    """The MLP quantized: three fully connected layers (two QGemm, one QLinearMatMul) of int8 weights."""
    return _calibrated(mlp())


MODELS = {
    "mlp (784-512-256-10)": mlp,
    "tiny CNN (3x32x32, 3 conv)": tiny_cnn,
    "int8 tiny CNN (QDQ)": int8_cnn,
    "keyword spotting DS-CNN": kws_dscnn,
}


def _size(tool: str, obj: str) -> tuple[int, int, int]:
    out = subprocess.run([tool, obj], capture_output=True, text=True, check=True).stdout.splitlines()[1].split()
    return int(out[0]), int(out[1]), int(out[2])


def measure(name: str, model: onnx.ModelProto, workdir: str) -> dict[str, Any]:
    from ..driver import CompileOptions, compile_model
    folder = os.path.join(workdir, re.sub(r"\W+", "_", name).strip("_"))
    info = compile_model(model, folder, CompileOptions(target="c", prefix="net"), command="onnxc compile --target c")
    row: dict[str, Any] = {"model": name, "arena_bytes": info["arena_bytes"], "weights_bytes": info["weights_bytes"],
                           "host_code_bytes": info["code_bytes"], "io_bytes": io_bytes(model)}
    if shutil.which(CROSS) is None:
        row["m4"] = f"{CROSS} not found"
        return row
    sizes = {}
    for src in ("net.c", "net_weights.c"):
        obj = os.path.join(folder, src[:-2] + ".m4.o")
        subprocess.run([CROSS, *CPU, "-Os", "-std=c99", "-ffreestanding", "-c", os.path.join(folder, src), "-o", obj],
                       check=True, capture_output=True)
        sizes[src] = _size("arm-none-eabi-size", obj)
    row["m4_code_bytes"] = sizes["net.c"][0]
    row["m4_model_data_bytes"] = sizes["net.c"][1] + sizes["net.c"][2]
    row["m4_weights_bytes"] = sum(sizes["net_weights.c"][:2])
    row.update(instructions(model, folder))
    return row


def io_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the model's inputs and outputs: the caller's buffers in a package, arena in TFLM."""
    init = {t.name for t in model.graph.initializer}
    total = 0
    for value in [*model.graph.input, *model.graph.output]:
        if value.name not in init:
            tensor = value.type.tensor_type
            count = int(np.prod([d.dim_value for d in tensor.shape.dim]))
            total += count * onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
    return total


def tflm_row(model: onnx.ModelProto, source: str | None = None, workdir: str = "",
             library_dir: str = "") -> dict[str, Any]:
    """TensorFlow Lite Micro's measurements of ``model``, or why there are none; with a TFLM
    ``source`` tree, also on the emulated boards (firmware in ``workdir``, TFLM's objects in
    ``library_dir``)."""
    try:
        return tflm.measure(model, source, workdir, library_dir)
    except ModuleNotFoundError as e:
        return {"tflm": f"needs {e.name} (pip install onnxc[bench])"}
    except Exception as e:  # TFLM's failure on one model is a cell of its row
        return {"tflm": f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"}


def instructions(model: onnx.ModelProto, folder: str) -> dict[str, Any]:
    """Instructions per inference on each emulated board (onnxc.benchmarks.mcu), on random
    inputs; a board's entry says why where the tools are missing or the run failed."""
    missing = [tool for tool in mcu.TOOLS if not (os.path.exists(tool) if tool.startswith("/") else shutil.which(tool))]
    if missing:
        return {f"{board}_instructions": f"needs {', '.join(missing)}" for board in mcu.FOOTPRINT_BOARDS}
    inputs = _write_inputs(model, folder)
    out: dict[str, Any] = {}
    for board in mcu.FOOTPRINT_BOARDS:
        elf = mcu.build_firmware(folder, "net", board, os.path.join(folder, f"net.{board}.elf"))
        run = mcu.run_firmware(elf, board, inputs, cwd=folder, timeout=1200)
        out[f"{board}_instructions"] = run.instructions if run.returncode == 0 and run.instructions else \
            f"failed: {(run.stdout + run.stderr).strip()[-120:]}"
    return out


# The int8 models of the requantization table: each requantization, and CMSIS-NN.
INT8_MODELS = {
    "int8 tiny CNN (QDQ)": int8_cnn,
    "int8 keyword spotting DS-CNN (QDQ, onnxruntime's quantizer)": int8_kws_dscnn,
    "int8 MLP (784-512-256-10, QDQ, onnxruntime's quantizer)": int8_mlp,
}
REQUANTIZATIONS = {"float": {}, "fixed_point": {"requantize": "fixed_point"}, "cmsis_nn": {"cmsis_nn": True}}
HELIUM_MODES = ("fixed_point", "cmsis_nn")   # measured on the Cortex-M55 as well


def requantization_row(name: str, model: onnx.ModelProto, workdir: str, cmsis_nn: str) -> dict[str, Any]:
    """Instructions of one inference on the Cortex-M4F board and the firmware's text with each
    requantization and with CMSIS-NN (its sources in ``cmsis_nn``, built with the package); on
    the Cortex-M55 board the instructions with fixed point and with CMSIS-NN's Helium code."""
    from ..driver import CompileOptions, compile_model
    row: dict[str, Any] = {"model": name}
    for mode, options in REQUANTIZATIONS.items():
        folder = os.path.join(workdir, re.sub(r"\W+", "_", name).strip("_") + "_" + mode)
        info = compile_model(model, folder, CompileOptions(target="c", prefix="net", **options),
                             command="onnxc compile --target c")
        inputs = _write_inputs(model, folder)
        for board in ("cortex-m4f", "cortex-m55") if mode in HELIUM_MODES else ("cortex-m4f",):
            elf = mcu.build_firmware(folder, "net", board, os.path.join(folder, f"net.{board}.elf"),
                                     cmsis_nn=cmsis_nn if mode == "cmsis_nn" else None)
            run = mcu.run_firmware(elf, board, inputs, cwd=folder, timeout=1200)
            key = f"{mode}_instructions" if board == "cortex-m4f" else f"{mode}_{board}_instructions"
            row[key] = run.instructions if run.returncode == 0 and run.instructions else \
                f"failed: {(run.stdout + run.stderr).strip()[-120:]}"
            if board == "cortex-m4f":
                row[f"{mode}_text_bytes"] = mcu.firmware_size(elf)[0]
        row[f"{mode}_arena_bytes"] = info["arena_bytes"]
    return row


def requantization_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | instructions, float requantization (default) | instructions, `--requantize fixed-point` "
             "| instructions, `--cmsis-nn` | firmware text, fixed point | firmware text, `--cmsis-nn` "
             "| arena, fixed point | arena, `--cmsis-nn` | Cortex-M55: instructions, fixed point "
             "| Cortex-M55: instructions, `--cmsis-nn` (Helium) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} |" + " |" * 8)
            continue
        cells = [r["float_instructions"], r["fixed_point_instructions"], r["cmsis_nn_instructions"],
                 r["fixed_point_text_bytes"], r["cmsis_nn_text_bytes"], r["fixed_point_arena_bytes"],
                 r["cmsis_nn_arena_bytes"], r["fixed_point_cortex-m55_instructions"],
                 r["cmsis_nn_cortex-m55_instructions"]]
        lines.append(f"| {r['model']} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _write_inputs(model: onnx.ModelProto, folder: str) -> list[str]:
    """Random inputs of ``model`` in ``folder``, as the example program reads them: their names."""
    rng = np.random.default_rng(0)
    inputs = []
    for i, value in enumerate(model.graph.input):
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs.append(f"input{i}.bin")
        rng.standard_normal(shape).astype(dtype).tofile(os.path.join(folder, inputs[-1]))
    return inputs


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | arena (RAM) | weights (flash) | code, Cortex-M4 -Os | code, this host -Os "
             "| instructions, Cortex-M4F | instructions, Cortex-M0+ |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def cell(value: Any) -> str:
        return f"{value:,}" if isinstance(value, int) else str(value)
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | |")
            continue
        cells = [r["arena_bytes"], r["weights_bytes"], r.get("m4_code_bytes", r.get("m4", "n/a")),
                 r["host_code_bytes"], r.get("cortex-m4f_instructions", "n/a"),
                 r.get("cortex-m0plus_instructions", "n/a")]
        lines.append(f"| {r['model']} | " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    return f"{value:,}" if isinstance(value, int) else str(value)


def tflm_table(rows: list[dict[str, Any]]) -> str:
    """onnxc next to TFLM: RAM and flash; where TFLM was built for the boards, instructions too."""
    lines = ["| model | onnxc arena | onnxc arena + inputs and outputs | TFLM arena, Cortex-M4F | TFLM arena, x86-64 "
             "| onnxc weights | onnxc code, Cortex-M4 | TFLM model | TFLM code, Cortex-M4F | TFLM matches onnxruntime |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} |" + " |" * 9)
            continue
        why = r.get("tflm", "n/a")
        board = r.get("tflm_cortex-m4f", "not built")
        cells = [r["arena_bytes"], r["arena_bytes"] + r["io_bytes"], r.get("tflm_cortex-m4f_arena_bytes", board),
                 r.get("tflm_arena_bytes", why), r["weights_bytes"], r.get("m4_code_bytes", r.get("m4", "n/a")),
                 r.get("tflm_model_bytes", why), r.get("tflm_cortex-m4f_code_bytes", board),
                 r.get("tflm_matches_onnxruntime", why)]
        lines.append(f"| {r['model']} | " + " | ".join(_cell(c) for c in cells) + " |")
    if not any("tflm_cortex-m4f_instructions" in r or "tflm_cortex-m0plus_instructions" in r for r in rows):
        return "\n".join(lines)
    lines += ["", "| model | onnxc, Cortex-M4F | TFLM, Cortex-M4F | onnxc, Cortex-M0+ | TFLM, Cortex-M0+ "
              "| TFLM on the boards = TFLM on this host |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            continue
        cells = [r.get(f"{who}{board}_instructions", r.get(f"tflm_{board}", "n/a") if who else "n/a")
                 for board in mcu.FOOTPRINT_BOARDS for who in ("", "tflm_")]
        same = all(r.get(f"tflm_{board}_matches_host") is True for board in mcu.FOOTPRINT_BOARDS)
        lines.append(f"| {r['model']} | " + " | ".join(_cell(c) for c in cells) + f" | {_cell(same)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxc.benchmarks.footprint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--tflm", action="store_true",
                        help="also measure TensorFlow Lite Micro on the same models (needs tflite-micro)")
    parser.add_argument("--tflm-source", metavar="DIR",
                        help="with --tflm: a TFLM source tree with its third-party downloads, built for the boards")
    parser.add_argument("--tflm-build", metavar="DIR",
                        help="where TFLM's objects are kept between runs (default: a temporary folder)")
    parser.add_argument("--cmsis-nn", metavar="DIR",
                        help="instead: the int8 models with each requantization and with CMSIS-NN (its folder) "
                             "on the Cortex-M4F board, and on the Cortex-M55 (Helium)")
    args = parser.parse_args(argv)
    if args.cmsis_nn:
        return _requantization_main(args.cmsis_nn, args.json)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-footprint-") as workdir:
        for name, build in MODELS.items():
            model = build()
            if model is None:
                rows.append({"model": name, "error": "needs onnxruntime (its quantizer)"})
                continue
            try:
                row = measure(name, model, workdir)
            except Exception as e:  # one model's failure is a row, not the end of the table
                rows.append({"model": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"})
                continue
            if args.tflm:
                firmware_dir = os.path.join(workdir, re.sub(r"\W+", "_", name).strip("_"), "tflm")
                os.makedirs(firmware_dir, exist_ok=True)
                row.update(tflm_row(model, args.tflm_source, firmware_dir,
                                    args.tflm_build or os.path.join(workdir, "tflm_objects")))
            rows.append(row)
    print(table(rows))
    if args.tflm:
        print()
        print(tflm_table(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0


def _requantization_main(cmsis_nn: str, json_path: str | None) -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-requantization-") as workdir:
        for name, build in INT8_MODELS.items():
            model = build()
            if model is None:
                rows.append({"model": name, "error": "needs onnxruntime (its quantizer)"})
                continue
            try:
                rows.append(requantization_row(name, model, workdir, os.path.abspath(cmsis_nn)))
            except Exception as e:  # one model's failure is a row, not the end of the table
                rows.append({"model": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"})
    print(requantization_table(rows))
    if json_path:
        os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
