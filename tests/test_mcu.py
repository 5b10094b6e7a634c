"""``--target c`` packages run on emulated microcontrollers (onnxc.benchmarks.mcu): the example
program linked into firmware for QEMU's boards, a Cortex-M4F (mps2-an386), Cortex-M0+ code,
ARMv6-M with soft float (on mps2-an385, a Cortex-M3, which executes it) and a Cortex-M55 with
Helium (mps3-an547), with output, input files and exit status over semihosting. Every output is
compared with the same package run on the host: integer outputs bit for bit, float ones to
rtol 1e-5.

All of it is the `mcu` suite (`python -m pytest -m mcu tests/test_mcu.py`: 100 tests); CI runs
the KWS CNN and the int8 network on every board and 4 conformance cases per board (`ci_slice`).
The toolchain and QEMU are installed from Debian's packages when missing; a missing one fails
under ONNXC_REQUIRE_TOOLS=1."""
from __future__ import annotations

import os
import subprocess
import zlib

import numpy as np
import onnx
import pytest

from helpers import run_ort
from onnxc.benchmarks import mcu
from test_embedded import cnn_model, make, mlp_model, package, parse_outputs, run_demo, write_inputs
from test_quantized import feeds_for, qdq_net
from tools import ensure_tools

pytestmark = pytest.mark.mcu


@pytest.fixture(scope="module", autouse=True)
def _tools():
    ensure_tools(mcu.TOOLS)


def _float_like(dtype: np.dtype) -> bool:
    return dtype.kind == "f" and (dtype.itemsize >= 4 or dtype.name == "bfloat16")


def assert_same_outputs(on_board: list[np.ndarray], on_host: list[np.ndarray], dtypes: list[np.dtype]) -> None:
    """Integer outputs equal bit for bit, float ones to rtol 1e-5."""
    assert len(on_board) == len(on_host) == len(dtypes), (len(on_board), len(on_host), len(dtypes))
    for i, (b, h, dtype) in enumerate(zip(on_board, on_host, dtypes)):
        assert b.shape == h.shape, f"output {i}: {b.shape} elements on the board, {h.shape} on the host"
        if _float_like(dtype):
            np.testing.assert_allclose(b, h, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(b, h, err_msg=f"output {i}")


def _output_dtypes(model: onnx.ModelProto) -> list[np.dtype]:
    return [np.dtype(onnx.helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)) for o in model.graph.output]


def _models() -> dict[str, tuple]:
    rng = np.random.default_rng(11)
    return {
        "mlp": (mlp_model(), {"x": rng.standard_normal((1, 32)).astype(np.float32)}, ()),
        "kws": (cnn_model(), {"x": rng.standard_normal((1, 1, 49, 10)).astype(np.float32)}, ("--dim", "N=1")),
        "qnet": (qdq_net(int8_io=True), feeds_for(qdq_net(int8_io=True)), ()),   # integer only: int8 in and out
    }


@pytest.mark.parametrize("board", sorted(mcu.BOARDS))
@pytest.mark.parametrize("name", ["mlp", pytest.param("kws", marks=pytest.mark.ci_slice),
                                  pytest.param("qnet", marks=pytest.mark.ci_slice)])
def test_model_on_the_board_prints_what_the_host_prints(tmp_path, name, board, capsys):
    model, feeds, extra = _models()[name]
    folder = package(tmp_path, model, name, *extra)
    make(folder)
    inputs = [os.path.basename(p) for p in write_inputs(folder, feeds)]
    on_host = run_demo(folder, name, [os.path.join(folder, p) for p in inputs])
    elf = mcu.build_firmware(folder, name, board, str(tmp_path / f"{name}.elf"))
    run = mcu.run_firmware(elf, board, inputs, cwd=folder)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert_same_outputs(parse_outputs(run.stdout), on_host, _output_dtypes(model))
    if name != "qnet":
        np.testing.assert_allclose(on_host[0], run_ort(model, feeds)[0].reshape(-1), rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_array_equal(on_host[0], run_ort(model, feeds)[0].reshape(-1))
    # the weights are where <NAME>_WEIGHTS_SECTION put them (flash), aligned to <NAME>_ALIGN
    weights = {s: a for s, a in mcu.symbols(elf).items() if s.startswith(f"{name}_w_")}
    first, end = mcu.BOARDS[board].flash
    assert weights and all(first <= a < end and a % 16 == 0 for a in weights.values()), weights
    assert run.instructions is not None and run.instructions > 0
    text, data, bss = mcu.firmware_size(elf)
    with capsys.disabled():
        print(f"\n{name} on {board}: {run.instructions:,} instructions per inference; firmware text {text:,}, "
              f"data {data:,}, bss {bss:,} bytes")


@pytest.mark.ci_slice
def test_a_failing_run_fails_the_firmware(tmp_path):
    """The exit status comes back: a program given a missing input file exits nonzero."""
    folder = package(tmp_path, mlp_model(), "mlp")
    elf = mcu.build_firmware(folder, "mlp", "cortex-m0plus", str(tmp_path / "mlp.elf"))
    run = mcu.run_firmware(elf, "cortex-m0plus", ["no_such_input.bin"], cwd=folder)
    assert run.returncode != 0 and "cannot open no_such_input.bin" in run.stdout + run.stderr


# --- conformance cases ----------------------------------------------------------------------------------

def _slice() -> list:
    """A fixed fortieth of the cases a package holds (the same every run); CI runs a sixteenth of it."""
    from conformance.cases import all_cases, expected_failures
    from conformance.embedded import package_refusals
    skip = expected_failures().keys() | package_refusals().keys()
    names = [n for n in sorted(all_cases()) if n not in skip and zlib.crc32(n.encode()) % 40 == 0]
    return [pytest.param(n, marks=pytest.mark.ci_slice) if zlib.crc32(n.encode()) % 640 == 0 else n for n in names]


@pytest.mark.parametrize("board", sorted(mcu.BOARDS))
@pytest.mark.parametrize("case_name", _slice())
def test_conformance_case_on_the_board(tmp_path, case_name, board):
    from conformance.cases import all_cases
    from conformance.embedded import build_case_package, parse_printed, write_case_inputs
    case = all_cases()[case_name]
    workdir = str(tmp_path / "pkg")
    host_exe = build_case_package(case, workdir)
    elf = mcu.build_firmware(workdir, "case", board, str(tmp_path / "case.elf"))
    for inputs, outputs in case.data_sets:
        files = write_case_inputs(case, inputs, workdir)
        on_host = subprocess.run([host_exe, *files], capture_output=True, text=True, cwd=workdir, check=True).stdout
        run = mcu.run_firmware(elf, board, files, cwd=workdir)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        expected = parse_printed(on_host, outputs)
        assert_same_outputs(parse_printed(run.stdout, outputs), expected, [e.dtype for e in expected])
