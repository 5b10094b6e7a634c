"""TensorFlow Lite Micro's side of the footprint table: each model as a .tflite flatbuffer
(onnxc.benchmarks.tflite_export) run by the ``tflite-micro`` package's interpreter, which is
TFLM's C++ built for this host.

- model bytes: the flatbuffer's size, what a firmware keeps in flash (weights, graph, options);
- arena bytes: what TFLM's recording allocator reports after a run: ``head``, the tensors'
  planned memory (the same on every target: inputs, outputs and intermediates share it, with
  the kernels' scratch buffers), and ``tail``, the persistent allocations (tensor and node
  structures, the kernels' own data), laid out for this host's 64-bit pointers, so that a
  32-bit Cortex-M's tail is smaller;
- whether TFLM's outputs match onnxruntime's on the same random inputs (float models to 1e-4
  of the largest magnitude, int8 ones to two steps of the output's quantization: TFLite
  requantizes in fixed point, onnxruntime in float).

Needs the ``tflite-micro`` package (``pip install onnxc[bench]``); without it :func:`measure`
raises ``ModuleNotFoundError``.
"""
from __future__ import annotations

import os
import re
import tempfile
from typing import Any

import numpy as np
import onnx

ARENA_LIMIT = 8 << 20    # what the interpreter may use; the footprint models need far less


def inputs_for(model: onnx.ModelProto, seed: int = 0) -> list[np.ndarray]:
    """Random standard-normal inputs in the model's (ONNX) shapes and types."""
    rng = np.random.default_rng(seed)
    init = {t.name for t in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in init:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        out.append(rng.standard_normal(shape).astype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)))
    return out


def _captured_stderr(call: Any) -> str:
    """What ``call()`` writes to file descriptor 2 (the C++ side prints there)."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", "replace")


def run(flatbuffer: bytes, inputs: list[np.ndarray], n_outputs: int) -> tuple[list[np.ndarray], dict[str, int]]:
    """TFLM's ``n_outputs`` outputs for ``inputs`` (ONNX layout: rank-4 inputs are transposed to
    NHWC) and its arena: {"arena_bytes", "arena_head_bytes", "arena_tail_bytes"}."""
    from tflite_micro.python.tflite_micro import runtime
    interpreter = runtime.Interpreter.from_bytes(flatbuffer, arena_size=ARENA_LIMIT)
    for i, x in enumerate(inputs):
        interpreter.set_input(x.transpose(0, 2, 3, 1).copy() if x.ndim == 4 else x, i)
    interpreter.invoke()
    outputs = [interpreter.get_output(i).copy() for i in range(n_outputs)]
    report = _captured_stderr(interpreter.print_allocations)
    arena = {}
    for key, part in (("arena_bytes", "total"), ("arena_head_bytes", "head"), ("arena_tail_bytes", "tail")):
        found = re.search(rf"Arena allocation {part} (\d+) bytes", report)
        if found is None:
            raise RuntimeError(f"TFLM printed no arena {part}: {report[-300:]!r}")
        arena[key] = int(found.group(1))
    return outputs, arena


def matches(model: onnx.ModelProto, inputs: list[np.ndarray], outputs: list[np.ndarray],
            output_steps: list[float | None]) -> bool:
    """Whether ``outputs`` are onnxruntime's for ``inputs``: within two quantization steps where
    ``output_steps`` gives one, else to 1e-4 of the largest magnitude."""
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    expected = session.run(None, dict(zip(names, inputs)))
    if len(expected) != len(outputs):
        return False
    for want, got, step in zip(expected, outputs, output_steps):
        if want.shape != got.shape:
            return False
        tolerance = 2 * step if step else 1e-4 * float(np.max(np.abs(want)))
        if float(np.max(np.abs(got - want))) > tolerance:
            return False
    return True


def output_steps(model: onnx.ModelProto) -> list[float | None]:
    """Per graph output, the scale of the QuantizeLinear whose DequantizeLinear (through
    Identity) computes it, or None for a float output."""
    init = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    steps: list[float | None] = []
    for output in model.graph.output:
        node = producer.get(output.name)
        while node is not None and node.op_type == "Identity":
            node = producer.get(node.input[0])
        step = None
        if node is not None and node.op_type == "DequantizeLinear" and node.input[1] in init:
            step = float(onnx.numpy_helper.to_array(init[node.input[1]]).ravel()[0])
        steps.append(step)
    return steps


def measure(model: onnx.ModelProto, source: str | None = None, workdir: str = "",
            library_dir: str = "") -> dict[str, Any]:
    """TFLM's row for ``model``: model bytes, arena bytes (total, head, tail) and whether its
    outputs match onnxruntime's; with a TFLM ``source`` tree, also its code, arena and
    instructions on the emulated boards (onnxc.benchmarks.tflm_firmware: the firmware built in
    ``workdir``, TFLM's objects in ``library_dir``)."""
    from .tflite_export import to_tflite
    flatbuffer = to_tflite(model)
    inputs = inputs_for(model)
    outputs, arena = run(flatbuffer, inputs, len(model.graph.output))
    row = {"tflm_model_bytes": len(flatbuffer), **{f"tflm_{k}": v for k, v in arena.items()},
           "tflm_matches_onnxruntime": matches(model, inputs, outputs, output_steps(model))}
    if source is not None:
        from . import tflm_firmware
        row.update(tflm_firmware.measure(source, flatbuffer, inputs, outputs, workdir, library_dir))
    return row
