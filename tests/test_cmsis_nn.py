"""``--cmsis-nn`` packages: eligible int8 convolutions and matrix products call CMSIS-NN (the
copy pinned in tests/third_party/cmsis_nn, its plain C path on this host), and give bit for bit
what the same package computes with the portable kernels in fixed-point mode (``--requantize
fixed-point``, itself checked against a numpy model in test_requantize.py). The `cmsis_nn`
suite; CI runs one case."""
from __future__ import annotations

import os
import re
import subprocess
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

from helpers import make_model
from onnxc.cli import main as cli_main
from test_embedded import make, package, parse_outputs, run_demo, write_inputs
from test_requantize import CONVS, conv_model

pytestmark = pytest.mark.cmsis_nn

CMSIS_NN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "third_party", "cmsis_nn")


def random_feeds(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        t = value.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if dtype == np.int8:
            feeds[value.name] = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            feeds[value.name] = (rng.standard_normal(shape) * 2).astype(dtype)
    return feeds


def both_ways(tmp_path, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list, list, str]:
    """The outputs of the --cmsis-nn package and of the --requantize fixed-point one, and the
    --cmsis-nn package's folder."""
    outputs = []
    folders = []
    for flags in (("--cmsis-nn",), ("--requantize", "fixed-point")):
        folder = package(tmp_path / flags[0].strip("-"), model, "net", *flags)
        make(folder, f"CMSIS_NN={CMSIS_NN}", "WERROR=1")
        outputs.append(run_demo(folder, "net", write_inputs(folder, feeds)))
        folders.append(folder)
    return outputs[0], outputs[1], folders[0]


def cmsis_calls(folder: str) -> list[str]:
    return re.findall(r"/\* CMSIS-NN (\w+) \*/", open(os.path.join(folder, "net.c")).read())


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.ci_slice) if c == "depthwise_stride_2" else c
                                  for c in sorted(CONVS)])
def test_convolution_through_cmsis_nn_is_the_portable_fixed_point(tmp_path, case):
    model, _, attrs = conv_model(**CONVS[case])
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    want = "arm_depthwise_conv_wrapper_s8" if attrs["group"] > 1 else "arm_convolve_wrapper_s8"
    assert cmsis_calls(folder) == [want]
    assert f"CMSIS-NN {want}" in open(os.path.join(folder, "README.md")).read()
    assert len(cmsis) == len(portable) == 1 and np.unique(portable[0]).size > 20
    np.testing.assert_array_equal(cmsis[0], portable[0])


# --- fully connected: QLinearMatMul and QGemm with a constant matrix B ----------------------------------

def fc_model(op: str, a_shape: tuple[int, ...], n: int, bias: str = "", per_channel: bool = False,
             trans_b: bool = False, alpha: float = 1.0, b_zero: int = 0, dtype: int = TP.INT8,
             seed: int = 0) -> onnx.ModelProto:
    """One QLinearMatMul or QGemm of A (a_shape, K last) by a constant B (K x N, or N x K with
    trans_b), scales chosen so that the outputs spread over the int8 range; ``bias``: "" (none),
    "column" (N), "row" (1 x N) or "scalar" (QGemm's C)."""
    rng = np.random.default_rng(seed)
    k = a_shape[-1]
    np_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    lo, hi = (-127, 128) if dtype == TP.INT8 else (0, 256)
    b = rng.integers(lo, hi, (n, k) if trans_b else (k, n)).astype(np_type)
    a_scale, b_scale = np.float32(0.02), np.float32(0.01)
    scales = rng.uniform(0.5, 2, n if per_channel else ()).astype(np.float32) * b_scale
    y_scale = np.float32(a_scale * b_scale * 75 * 75 * k ** 0.5 / 40)
    shift = 0 if dtype == TP.INT8 else 128
    p = {"as": a_scale, "az": np.array(-7 + shift, np_type), "b": b, "bs": scales, "bz": np.full(np.shape(scales), b_zero + shift, np_type),
         "ys": y_scale, "yz": np.array(4 + shift, np_type)}
    if op == "QLinearMatMul":
        node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
        opsets = {}
    else:
        shapes = {"": None, "column": (n,), "row": (1, n), "scalar": ()}
        inputs = ["a", "as", "az", "b", "bs", "bz", "c" if bias else "", "ys", "yz"]
        if bias:
            p["c"] = rng.integers(-20000, 20000, shapes[bias]).astype(np.int32)
        node = helper.make_node(op, inputs, ["y"], domain="com.microsoft", transB=int(trans_b), alpha=alpha)
        opsets = {"com.microsoft": 1}
    initializers = [onnx.numpy_helper.from_array(np.asarray(v), name) for name, v in p.items()]
    return make_model([node], [("a", dtype, list(a_shape))], [("y", dtype, [*a_shape[:-1], n])], initializers,
                      opset=13, extra_opsets=opsets)


FULLY_CONNECTED = {   # K not a multiple of 4 or 16, N odd, one row and several
    "matmul_5x37_by_37x13": dict(op="QLinearMatMul", a_shape=(5, 37), n=13),
    "matmul_batched_2x3x19_by_19x9": dict(op="QLinearMatMul", a_shape=(2, 3, 19), n=9),
    "matmul_vector_64_by_64x10": dict(op="QLinearMatMul", a_shape=(64,), n=10),
    "qgemm_per_channel_bias_trans_b": dict(op="QGemm", a_shape=(4, 45), n=11, bias="column", per_channel=True,
                                           trans_b=True),
    "qgemm_per_tensor_no_bias_alpha": dict(op="QGemm", a_shape=(3, 33), n=7, alpha=0.5),
    "qgemm_row_bias_one_row": dict(op="QGemm", a_shape=(1, 50), n=15, bias="row", per_channel=True),
    "qgemm_scalar_bias": dict(op="QGemm", a_shape=(6, 17), n=5, bias="scalar", trans_b=True),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.ci_slice) if c == "qgemm_per_channel_bias_trans_b"
                                  else c for c in sorted(FULLY_CONNECTED)])
def test_fully_connected_through_cmsis_nn_is_the_portable_fixed_point(tmp_path, case):
    spec = FULLY_CONNECTED[case]
    model = fc_model(**spec)
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    want = "arm_fully_connected_per_channel_s8" if spec.get("per_channel") else "arm_fully_connected_s8"
    assert cmsis_calls(folder) == [want]
    node = "com.microsoft::QGemm ''" if spec["op"] == "QGemm" else "QLinearMatMul ''"
    assert f"- {node}: CMSIS-NN {want}" in open(os.path.join(folder, "README.md")).read()
    assert len(cmsis) == len(portable) == 1
    assert np.unique(portable[0]).size >= min(20, portable[0].size * 2 // 3)   # neither saturated nor constant
    np.testing.assert_array_equal(cmsis[0], portable[0])


def _float_mlp(seed: int = 0) -> onnx.ModelProto:
    """x (3 x 24) -> Gemm (transB, bias) -> MatMul -> y: for onnxruntime's QDQ quantizer."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((19, 24)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(19) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((19, 11)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("MatMul", ["h", "w2"], ["y"])]
    return make_model(nodes, [("x", TP.FLOAT, [3, 24])], [("y", TP.FLOAT, [3, 11])],
                      [onnx.numpy_helper.from_array(v, name) for name, v in (("w1", w1), ("b1", b1), ("w2", w2))],
                      opset=13)


def test_qdq_gemm_and_matmul_through_fuse_qdq_call_cmsis_nn(tmp_path):
    """onnxruntime's QDQ Gemm and MatMul, made QGemm and QLinearMatMul by the fuse_qdq pass."""
    model = _quantized(_float_mlp())
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    assert cmsis_calls(folder) == ["arm_fully_connected_s8"] * 2
    readme = open(os.path.join(folder, "README.md")).read()
    assert "- com.microsoft::QGemm '" in readme and "- QLinearMatMul '" in readme
    assert np.unique(portable[0]).size > 10
    np.testing.assert_array_equal(cmsis[0], portable[0])


@pytest.mark.parametrize("case, reason", [
    ("b_zero", "weights with a nonzero zero point (CMSIS-NN's are symmetric)"),
    ("uint8", "CMSIS-NN's int8 kernels take int8 A, B and Y (not uint8)"),
    ("float_output", "a float output (CMSIS-NN's fully connected gives int8)"),
    ("bias_per_element", "a bias per output element (CMSIS-NN adds one per column)"),
])
def test_an_ineligible_matrix_product_keeps_the_portable_kernel_and_says_why(tmp_path, case, reason):
    if case == "b_zero":
        model = fc_model("QLinearMatMul", (4, 21), 6, b_zero=3)
    elif case == "uint8":
        model = fc_model("QGemm", (4, 21), 6, bias="column", dtype=TP.UINT8)
    elif case == "float_output":   # (QGemm without y_zero_point gives float32)
        model = fc_model("QGemm", (4, 21), 6, bias="column")
        model.graph.node[0].input[:] = list(model.graph.node[0].input[:8])
        model.graph.output[0].type.tensor_type.elem_type = TP.FLOAT
    else:
        model = fc_model("QGemm", (4, 21), 6, bias="row")
        c = next(t for t in model.graph.initializer if t.name == "c")
        c.CopyFrom(onnx.numpy_helper.from_array(
            np.random.default_rng(2).integers(-9000, 9000, (4, 6)).astype(np.int32), "c"))
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    assert cmsis_calls(folder) == []
    assert f"/* portable kernel, not CMSIS-NN: {reason} */" in open(os.path.join(folder, "net.c")).read()
    assert f"'': portable kernel, not CMSIS-NN: {reason}" in open(os.path.join(folder, "README.md")).read()
    np.testing.assert_array_equal(cmsis[0], portable[0])


def _quantized(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """``model`` through onnxruntime's static quantizer: QDQ, int8 weights (symmetric) and activations."""
    from onnxc.benchmarks.footprint import quantize_qdq
    return quantize_qdq(model, [random_feeds(model, seed + i) for i in range(8)])


def test_int8_tiny_cnn_through_cmsis_nn_is_the_portable_fixed_point(tmp_path):
    """The footprint table's int8 tiny CNN: its three convolutions and its classifier call CMSIS-NN."""
    from onnxc.benchmarks.footprint import int8_cnn
    model = int8_cnn()
    assert model is not None, "onnxruntime's quantizer (a test dependency) builds the int8 tiny CNN"
    feeds = random_feeds(model)
    cmsis, portable, folder = both_ways(tmp_path, model, feeds)
    assert cmsis_calls(folder) == ["arm_convolve_wrapper_s8"] * 3 + ["arm_fully_connected_s8"]
    np.testing.assert_array_equal(cmsis[0], portable[0])


def test_depthwise_separable_cnn_through_cmsis_nn_is_the_portable_fixed_point(tmp_path):
    """The keyword-spotting DS-CNN quantized: a 10x4 stride-2 convolution with asymmetric pads,
    3x3 depthwise and 1x1 pointwise convolutions, a fully connected classifier."""
    from onnxc.benchmarks.footprint import kws_dscnn
    model = _quantized(kws_dscnn())
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    calls = cmsis_calls(folder)
    assert calls.count("arm_depthwise_conv_wrapper_s8") == 4 and calls.count("arm_convolve_wrapper_s8") == 5, calls
    assert calls[-1] == "arm_fully_connected_s8", calls
    np.testing.assert_array_equal(cmsis[0], portable[0])


def test_an_ineligible_convolution_keeps_the_portable_kernel_and_says_why(tmp_path):
    """Weights with a nonzero zero point (CMSIS-NN's are symmetric) next to an eligible
    convolution: that node keeps the portable kernel, its function and the README say why."""
    model, _, _ = conv_model(c=3, m=4, hw=(6, 6), kernel=(3, 3), pads=(1, 1, 1, 1))
    second, _, _ = conv_model(c=4, m=5, hw=(6, 6), kernel=(1, 1), seed=3)
    for t in second.graph.initializer:
        t.name = "second_" + t.name
        if t.name == "second_wz":
            t.CopyFrom(onnx.numpy_helper.from_array(np.full(5, 2, np.int8), "second_wz"))
    node = second.graph.node[0]
    node.input[:] = ["y"] + ["second_" + name for name in node.input[1:]]
    node.output[0] = "z"
    node.name = "pointwise"
    model.graph.node.append(node)
    model.graph.initializer.extend(second.graph.initializer)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", TP.INT8, [1, 5, 6, 6]))
    cmsis, portable, folder = both_ways(tmp_path, model, random_feeds(model))
    assert cmsis_calls(folder) == ["arm_convolve_wrapper_s8"]
    reason = "portable kernel, not CMSIS-NN: weights with a nonzero zero point (CMSIS-NN's are symmetric)"
    assert f"/* {reason} */" in open(os.path.join(folder, "net.c")).read()
    assert f"- QLinearConv 'pointwise': {reason}" in open(os.path.join(folder, "README.md")).read()
    np.testing.assert_array_equal(cmsis[0], portable[0])


def test_cmsis_nn_is_for_packages_in_fixed_point(tmp_path, capsys):
    model, _, _ = conv_model(c=2, m=2, hw=(4, 4), kernel=(1, 1))
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    assert cli_main(["compile", path, "--cmsis-nn", "-o", str(tmp_path / "a")]) == 1
    assert "--cmsis-nn needs --target c" in capsys.readouterr().err
    assert cli_main(["compile", path, "--target", "c", "--cmsis-nn", "--requantize", "float",
                     "-o", str(tmp_path / "b")]) == 1
    assert "cannot be combined with --requantize float" in capsys.readouterr().err


# --- on the emulated boards: CMSIS-NN's DSP code on the Cortex-M4F, its Helium code on the Cortex-M55 ---------

def _on_the_board(tmp_path, model: onnx.ModelProto, flags: tuple[str, ...], feeds: dict[str, np.ndarray], board: str):
    """The outputs and the instructions of one inference on ``board``, and the firmware."""
    from onnxc.benchmarks import mcu
    folder = package(tmp_path / flags[0].strip("-"), model, "net", *flags)
    inputs = [os.path.basename(p) for p in write_inputs(folder, feeds)]
    elf = mcu.build_firmware(folder, "net", board, os.path.join(folder, "net.elf"),
                             cmsis_nn=CMSIS_NN if "--cmsis-nn" in flags else None)
    run = mcu.run_firmware(elf, board, inputs, cwd=folder, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return parse_outputs(run.stdout), run.instructions, elf


ONE_BY_N = dict(c=5, m=7, hw=(1, 20), kernel=(1, 4), strides=(1, 2), pads=(0, 3, 0, 1))   # CMSIS-NN's 1xN kernel


def _board_models() -> dict:
    from onnxc.benchmarks.footprint import int8_cnn, int8_mlp, kws_dscnn
    return {"depthwise": lambda: conv_model(**CONVS["depthwise_stride_2"])[0],
            "conv_3x3_per_channel": lambda: conv_model(**CONVS["3x3_per_channel"])[0],
            "conv_1x1": lambda: conv_model(**CONVS["1x1"])[0],
            "conv_odd_dilated_per_tensor": lambda: conv_model(**CONVS["odd_dilated_per_tensor"])[0],
            "conv_1xn_stride_2_asymmetric_pads": lambda: conv_model(**ONE_BY_N)[0],
            "fully_connected": lambda: fc_model(**FULLY_CONNECTED["qgemm_per_channel_bias_trans_b"]),
            "fully_connected_per_tensor": lambda: fc_model(**FULLY_CONNECTED["matmul_5x37_by_37x13"]),
            "int8_tiny_cnn": int8_cnn, "int8_kws_dscnn": lambda: _quantized(kws_dscnn()), "int8_mlp": int8_mlp}


@pytest.mark.mcu
@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m55"])
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.ci_slice) if n in ("depthwise", "fully_connected")
                                  else n for n in ("depthwise", "conv_3x3_per_channel", "conv_1x1",
                                                   "conv_odd_dilated_per_tensor", "conv_1xn_stride_2_asymmetric_pads",
                                                   "fully_connected", "fully_connected_per_tensor", "int8_tiny_cnn",
                                                   "int8_kws_dscnn", "int8_mlp")])
def test_on_the_board_cmsis_nn_is_the_portable_fixed_point(tmp_path, name, board, capsys):
    """CMSIS-NN built for the board's core gives the portable fixed-point kernels' bits on the
    emulated board, and what the host computes: on the Cortex-M4F its DSP code (-mcpu=cortex-m4
    defines ARM_MATH_DSP), on the Cortex-M55 its Helium code (-mcpu=cortex-m55 defines
    __ARM_FEATURE_MVE, so ARM_MATH_MVEI): there CMSIS-NN's functions in the firmware hold MVE
    instructions, on the Cortex-M4F none."""
    from onnxc.benchmarks import mcu
    from tools import ensure_tools
    ensure_tools(mcu.TOOLS)
    model = _board_models()[name]()
    assert model is not None, "onnxruntime's quantizer (a test dependency) builds the int8 models"
    feeds = random_feeds(model)
    cmsis, cmsis_count, elf = _on_the_board(tmp_path, model, ("--cmsis-nn",), feeds, board)
    assert cmsis_calls(str(tmp_path / "cmsis-nn" / "net")), "the package calls CMSIS-NN"
    helium = {f: n for f, n in mcu.helium_instructions(elf).items() if f.startswith("arm_")}
    if board == "cortex-m55":
        assert sum(helium.values()) >= 20, helium   # the kernels' vector loops, not a stray instruction
    else:
        assert not helium, helium
    portable, portable_count, _ = _on_the_board(tmp_path, model, ("--requantize", "fixed-point"), feeds, board)
    np.testing.assert_array_equal(cmsis[0], portable[0])
    host, _, _ = both_ways(tmp_path / "host", model, feeds)
    np.testing.assert_array_equal(cmsis[0], host[0])
    with capsys.disabled():
        print(f"\n{name} on {board}: {cmsis_count:,} instructions with CMSIS-NN, {portable_count:,} with the "
              "portable fixed-point kernels")


# --- CMake: the package's CMakeLists with CMSIS-NN, as docs/embedded.md tells -----------------------------

def _cmake(source, build, *options: str) -> None:
    from tools import ensure_tools
    ensure_tools({"cmake": "cmake"})
    for cmd in (["cmake", "-S", str(source), "-B", str(build), *options], ["cmake", "--build", str(build)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _kws_with_feeds() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The quantized DS-CNN: CMSIS-NN's convolution, depthwise convolution and fully connected layer."""
    from onnxc.benchmarks.footprint import kws_dscnn
    model = _quantized(kws_dscnn())
    return model, random_feeds(model)


@pytest.mark.ci_slice
def test_cmake_builds_a_cmsis_nn_package(tmp_path):
    """The package as the top-level project, CMSIS-NN's folder named by -DCMSIS_NN (the package
    builds the cmsis-nn library from its sources); and as a subdirectory of a project that already
    has the cmsis-nn target (CMSIS-NN's own CMakeLists defines it), which the package links and
    builds none of its own. Warnings are errors; both programs print what the Makefile's prints."""
    model, feeds = _kws_with_feeds()
    cmsis, portable, folder = both_ways(tmp_path / "make", model, feeds)
    np.testing.assert_array_equal(cmsis[0], portable[0])
    inputs = write_inputs(folder, feeds)
    alone = tmp_path / "alone"
    _cmake(folder, alone, f"-DCMSIS_NN={CMSIS_NN}", "-DNET_WERROR=ON")
    assert (alone / "libcmsis-nn.a").is_file()
    np.testing.assert_array_equal(run_demo(str(alone), "net", inputs)[0], cmsis[0])

    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.13)
        project(app C)
        file(GLOB CMSIS_NN_SOURCES "{CMSIS_NN}/Source/*/*.c")
        add_library(cmsis-nn STATIC ${{CMSIS_NN_SOURCES}})
        target_include_directories(cmsis-nn PUBLIC "{CMSIS_NN}/Include")
        add_subdirectory("{folder}" net)
        add_executable(app "{folder}/net_demo.c")
        target_link_libraries(app PRIVATE net)
        """))
    build = project / "build"
    _cmake(project, build, "-DNET_WERROR=ON")
    assert (build / "libcmsis-nn.a").is_file() and not list((build / "net").glob("*cmsis*"))
    proc = subprocess.run([str(build / "app"), *inputs], capture_output=True, text=True, check=True)
    np.testing.assert_array_equal(parse_outputs(proc.stdout)[0], cmsis[0])


@pytest.mark.mcu
@pytest.mark.parametrize("board", ["cortex-m4f", "cortex-m55"])
def test_cmake_cross_builds_a_cmsis_nn_package_into_firmware(tmp_path, board):
    """A firmware project for the board through a CMake toolchain file (arm-none-eabi-gcc and the
    board's core): the package a subdirectory, CMSIS-NN from -DCMSIS_NN built for the core (its
    Helium code on the Cortex-M55), the weights placed in flash by the package's macros, the
    example program linked with the board's start-up code and linker script. On the emulated
    board it prints what the host prints."""
    from onnxc.benchmarks import mcu
    from tools import ensure_tools
    ensure_tools(mcu.TOOLS)
    spec = mcu.BOARDS[board]
    model, feeds = _kws_with_feeds()
    host, _, folder = both_ways(tmp_path / "host", model, feeds)
    inputs = [os.path.basename(p) for p in write_inputs(folder, feeds)]
    project = tmp_path / "firmware"
    project.mkdir()
    (project / "toolchain.cmake").write_text(textwrap.dedent(f"""\
        set(CMAKE_SYSTEM_NAME Generic)
        set(CMAKE_SYSTEM_PROCESSOR arm)
        set(CMAKE_C_COMPILER arm-none-eabi-gcc)
        set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
        set(CMAKE_C_FLAGS_INIT "{' '.join(spec.cflags)}")
        """))
    (project / "CMakeLists.txt").write_text(textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.13)
        project(firmware C)
        add_subdirectory("{folder}" net)
        target_compile_definitions(net PRIVATE "NET_WEIGHTS_SECTION=\\"{mcu.WEIGHTS_SECTION}\\"" NET_ALIGN=16)
        add_executable(firmware.elf "{mcu.FIRMWARE}/startup.c" "{folder}/net_demo.c")
        target_compile_definitions(firmware.elf PRIVATE DEMO_CLOCK=mcu_timer_ticks)
        target_link_libraries(firmware.elf PRIVATE net)
        target_link_options(firmware.elf PRIVATE --specs=rdimon.specs -nostartfiles
                            -T "{mcu.FIRMWARE}/{spec.linker_script}" -Wl,--gc-sections)
        """))
    build = project / "build"
    _cmake(project, build, f"-DCMAKE_TOOLCHAIN_FILE={project / 'toolchain.cmake'}", "-DCMAKE_BUILD_TYPE=MinSizeRel",
           f"-DCMSIS_NN={CMSIS_NN}", "-DNET_WERROR=ON")
    elf = str(build / "firmware.elf")
    first, end = spec.flash
    weights = [a for s, a in mcu.symbols(elf).items() if s.startswith("net_w_")]
    assert weights and all(first <= a < end and a % 16 == 0 for a in weights), weights
    helium = sum(n for f, n in mcu.helium_instructions(elf).items() if f.startswith("arm_"))
    if board == "cortex-m55":
        assert helium >= 20, helium
    else:
        assert helium == 0, helium
    run = mcu.run_firmware(elf, board, inputs, cwd=folder, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    np.testing.assert_array_equal(parse_outputs(run.stdout)[0], host[0])
