"""``onnxc compile --target c``: the freestanding C99 package (codegen/embedded.py).

Each package is built with its own Makefile (-std=c99 -Wall -Wextra -Wpedantic -Wconversion,
-Werror asked for, model code -ffreestanding), with gcc and clang, and with CMake; its example
program's printed outputs are compared with onnxruntime. Off the host: the package
cross-compiled for 32-bit ARM Linux runs under qemu user-mode emulation and must print what the
host printed, and it links for a Cortex-M4 with arm-none-eabi-gcc (newlib's libm only); running
it on emulated microcontrollers is test_mcu.py, AArch64 test_aarch64.py. The tests install those
toolchains from Debian's packages when they are missing; where that cannot be done they skip,
saying so, or fail under ONNXC_REQUIRE_TOOLS=1."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from helpers import make_model, run_ort
from tools import ensure_tools
from onnxc.cli import main as cli_main
from onnxc.compiler.errors import UnsupportedError
from onnxc.driver import CompileOptions, compile_model, generate_source

RNG = np.random.default_rng(7)
LIBM = re.compile(r"^(a?(sin|cos|tan)h?|atan2|exp|exp2|expm1|log|log2|log10|log1p|pow|sqrt|cbrt|fabs|floor|ceil|round"
                  r"|l?lround|l?lrint|rint|nearbyint|trunc|fmod|remainder|fmin|fmax|fma|erfc?|tgamma|lgamma|hypot"
                  r"|copysign|frexp|ldexp|modf|scalbn|nextafter)[fl]?$")
STRING_H = {"memcpy", "memmove", "memset", "memcmp", "strlen"}


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def mlp_model(seed: int = 1) -> onnx.ModelProto:
    RNG = np.random.default_rng(seed)
    w1 = (RNG.standard_normal((64, 32)) * 0.2).astype(np.float32)
    w2 = (RNG.standard_normal((64, 10)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]),
             helper.make_node("Add", ["m", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
             helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0)]
    inits = [_init("w1", w1), _init("b1", RNG.standard_normal(64).astype(np.float32)),
             _init("w2", w2), _init("b2", RNG.standard_normal(10).astype(np.float32))]
    return make_model(nodes, [("x", TP.FLOAT, [1, 32])], [("probs", TP.FLOAT, [1, 10]), ("label", TP.INT64, [1])],
                      inits, opset=17)


def cnn_model(batch="N", seed: int = 2) -> onnx.ModelProto:
    """A keyword-spotting-sized CNN over a 1x49x10 feature map: Conv + BatchNormalization +
    Relu, a depthwise conv, pooling, a residual Add and a classifier."""
    RNG = np.random.default_rng(seed)
    def conv_w(m, c, k):
        return (RNG.standard_normal((m, c, k, k)) * (1.0 / np.sqrt(c * k * k))).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c1", "s", "t", "mu", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "wd"], ["d"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Relu", ["d"], ["rd"]),
             helper.make_node("Conv", ["rd", "wp", "bp"], ["p"]),
             helper.make_node("Add", ["p", "r1"], ["res"]),
             helper.make_node("MaxPool", ["res"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["mp"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [_init("w1", conv_w(8, 1, 3)), _init("b1", np.zeros(8, np.float32)),
             _init("s", RNG.uniform(0.5, 1.5, 8).astype(np.float32)), _init("t", RNG.standard_normal(8).astype(np.float32)),
             _init("mu", RNG.standard_normal(8).astype(np.float32) * 0.1),
             _init("var", RNG.uniform(0.5, 2, 8).astype(np.float32)),
             _init("wd", conv_w(8, 1, 3)), _init("wp", conv_w(8, 8, 1)), _init("bp", np.zeros(8, np.float32)),
             _init("wf", (RNG.standard_normal((12, 8)) * 0.3).astype(np.float32)),
             _init("bf", RNG.standard_normal(12).astype(np.float32))]
    return make_model(nodes, [("x", TP.FLOAT, [batch, 1, 49, 10])], [("y", TP.FLOAT, [batch, 12])], inits, opset=17)


def package(tmp_path, model: onnx.ModelProto, name: str, *extra: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    out = tmp_path / name
    assert cli_main(["compile", str(path), "--target", "c", "--name", name, "-o", str(out), "-q", *extra]) == 0
    return str(out)


def write_inputs(folder: str, feeds: dict[str, np.ndarray]) -> list[str]:
    paths = []
    for i, array in enumerate(feeds.values()):
        path = os.path.join(folder, f"input{i}.bin")
        np.ascontiguousarray(array).tofile(path)
        paths.append(path)
    return paths


def parse_outputs(text: str) -> list[np.ndarray]:
    """The example program's output: a '# output i NAME' line, then one element a line."""
    outputs: list[list[float]] = []
    for line in text.splitlines():
        if line.startswith("# output"):
            outputs.append([])
        elif line.strip() and not line.startswith("#"):   # ("# clock N" with DEMO_CLOCK)
            outputs[-1].append(float(line))
    return [np.array(o) for o in outputs]


def make(folder: str, *args: str, env: dict | None = None) -> None:
    proc = subprocess.run(["make", "-s", "-C", folder, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def run_demo(folder: str, name: str, inputs: list[str], runner: tuple[str, ...] = ()) -> list[np.ndarray]:
    proc = subprocess.run([*runner, os.path.join(folder, f"{name}_demo"), *inputs], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return parse_outputs(proc.stdout)


def assert_outputs(actual: list[np.ndarray], expected: list[np.ndarray], rtol=1e-4, atol=1e-5) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, np.asarray(e, np.float64).reshape(-1), rtol=rtol, atol=atol)


# --- the package ------------------------------------------------------------------------------------

def test_package_is_freestanding_and_states_its_sizes(tmp_path):
    folder = package(tmp_path, mlp_model(), "mlp")
    assert sorted(os.listdir(folder)) == ["CMakeLists.txt", "Makefile", "README.md", "mlp.c", "mlp.h", "mlp_demo.c",
                                          "mlp_weights.c"]
    header = open(os.path.join(folder, "mlp.h")).read()
    arena = int(re.search(r"#define MLP_ARENA_BYTES (\d+)u", header).group(1))
    weights = int(re.search(r"#define MLP_WEIGHTS_BYTES (\d+)u", header).group(1))
    weights_c = open(os.path.join(folder, "mlp_weights.c")).read()
    # float weights as the hex integers of their bits: about 11 characters for 4 bytes
    arrays = re.findall(r"^extern const union (\w+) { uint32_t bits\[(\d+)\]; float values\[\2\]; } \1;", weights_c, re.M)
    assert len(arrays) == 2 and all(name.startswith("mlp_w_") for name, _ in arrays)
    assert weights == sum(4 * int(n) for _, n in arrays) >= (64 * 32 + 64 * 10) * 4  # small biases stay inline
    assert len(weights_c) < 3 * weights
    dry = {w: subprocess.run(["make", "-n", "-C", folder, *w], capture_output=True, text=True, check=True).stdout
           for w in ((), ("WERROR=1",))}
    assert "-Werror" not in dry[()] and "-Werror" in dry[("WERROR=1",)]   # warnings are errors when asked
    readme = open(os.path.join(folder, "README.md")).read()
    assert f"| {arena} |" in readme and f"| {weights} |" in readme
    assert re.search(r"\| code, `mlp.c`.*\| \d+ \|", readme)
    for name in ("mlp.c", "mlp_weights.c"):
        obj = str(tmp_path / (name[:-2] + ".o"))
        built = subprocess.run(["cc", "-std=c99", "-O2", "-ffreestanding", "-c", os.path.join(folder, name), "-o", obj],
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        # what the object needs from outside: libm, a few string.h functions, its own weights
        needed = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout.split()[1::2]
        assert all(LIBM.match(s) or s in STRING_H or s.startswith("mlp_w_") for s in needed), needed
        # what it defines for others: only prefixed symbols (two models link together)
        defined = subprocess.run(["nm", "-g", "--defined-only", obj], capture_output=True, text=True,
                                 check=True).stdout.split()[2::3]
        assert defined and all(s.startswith("mlp_") for s in defined), defined


def test_package_carries_only_the_gemm_its_kernels_call(tmp_path):
    """Each element type's GEMM is a helper of its own: a float32 model's package has no double
    or integer GEMM, a double or int32 MatMul brings its own and no other."""
    for name, model, dims in (("mlp", mlp_model(), ()), ("cnn", cnn_model(), ("--dim", "N=1"))):
        source = open(os.path.join(package(tmp_path, model, name, *dims), f"{name}.c")).read()
        assert "onnxc_sgemm" in source
        assert not re.search(r"onnxc_gemm_(double|uint32|uint64)\b", source), name
    for elem, kept in ((TP.DOUBLE, "double"), (TP.INT32, "uint32")):
        matmul = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", elem, [8, 16]), ("b", elem, [16, 8])],
                            [("y", elem, [8, 8])])
        source = generate_source(matmul, CompileOptions(target="c")).source
        assert {g for g in ("double", "uint32", "uint64") if f"onnxc_gemm_{g}(" in source} == {kept}


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("build", ["mlp", "cnn"])
def test_package_builds_warning_free_and_matches_onnxruntime(tmp_path, build, cc):
    if cc == "clang":
        ensure_tools({"clang": "clang"})
    model = mlp_model() if build == "mlp" else cnn_model()
    feeds = {"x": RNG.standard_normal((1, 32) if build == "mlp" else (1, 1, 49, 10)).astype(np.float32)}
    folder = package(tmp_path, model, build, *(() if build == "mlp" else ("--dim", "N=1")))
    make(folder, f"CC={cc}", "WERROR=1")
    got = run_demo(folder, build, write_inputs(folder, feeds))
    assert_outputs(got, run_ort(model, feeds))


def blocked_model() -> onnx.ModelProto:
    """GEMMs larger than a small-memory block in every direction: a 3x3 convolution of 32 to 48
    channels on 20 x 20 (K = 288 over KC = 64, 48 rows over blocks of 16, 400 columns in
    im2col bands) and a MatMul of 20 x 200 by 200 x 150."""
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((48, 32, 3, 3)) / np.sqrt(288)).astype(np.float32)
    m = (rng.standard_normal((200, 150)) / np.sqrt(200)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("MatMul", ["a", "m"], ["z"])]
    inits = [_init("w", w), _init("b", rng.standard_normal(48).astype(np.float32)), _init("m", m)]
    return make_model(nodes, [("x", TP.FLOAT, [1, 32, 20, 20]), ("a", TP.FLOAT, [20, 200])],
                      [("y", TP.FLOAT, [1, 48, 20, 20]), ("z", TP.FLOAT, [20, 150])], inits, opset=17)


def test_small_memory_blocking_matches_onnxruntime(tmp_path):
    """Packages block their GEMMs and im2col bands for a microcontroller's RAM: the arena
    stays under 100 KB here (a native artifact of the same model plans about 440 KB), and
    every block boundary gives the right result."""
    model = blocked_model()
    rng = np.random.default_rng(6)
    feeds = {"x": rng.standard_normal((1, 32, 20, 20)).astype(np.float32),
             "a": rng.standard_normal((20, 200)).astype(np.float32)}
    folder = package(tmp_path, model, "blocked")
    header = open(os.path.join(folder, "blocked.h")).read()
    assert int(re.search(r"#define BLOCKED_ARENA_BYTES (\d+)u", header).group(1)) < 100_000
    make(folder)
    assert_outputs(run_demo(folder, "blocked", write_inputs(folder, feeds)), run_ort(model, feeds))


def test_weights_in_a_bin_file_the_program_loads(tmp_path):
    """--weights bin: no kws_weights.c; kws_weights.bin holds the same values, the example
    program reads it and passes it to the init function, and the results are the same."""
    model = cnn_model()
    feeds = {"x": np.random.default_rng(4).standard_normal((1, 1, 49, 10)).astype(np.float32)}
    folder = package(tmp_path, model, "kws", "--dim", "N=1", "--weights", "bin")
    assert "kws_weights.c" not in os.listdir(folder)
    header = open(os.path.join(folder, "kws.h")).read()
    assert "int kws_init(void *arena, const void *weights);" in header
    weights = int(re.search(r"#define KWS_WEIGHTS_BYTES (\d+)u", header).group(1))
    assert os.path.getsize(os.path.join(folder, "kws_weights.bin")) == weights > 0
    make(folder)
    got = run_demo(folder, "kws", [os.path.join(folder, "kws_weights.bin"), *write_inputs(folder, feeds)])
    assert_outputs(got, run_ort(model, feeds))
    assert cli_main(["compile", str(tmp_path / "kws.onnx"), "--weights", "bin", "-o", str(tmp_path / "native"),
                     "-q"]) != 0   # a native artifact has its own weights file


@pytest.mark.parametrize("build", ["cc", "cmake"])
def test_two_models_link_into_one_program(tmp_path, build):
    """Two packages in one program, as their files and symbols are named after --name: built
    with cc, the weights of one placed in a section of their own and aligned by its macros;
    and with CMake, each package a subdirectory whose library the program links (their example
    programs are built only where a package is the top-level project), warnings as errors."""
    a, b = package(tmp_path, mlp_model(), "first"), package(tmp_path, cnn_model(), "second", "--dim", "N=1")
    main = tmp_path / "both.c"
    main.write_text(textwrap.dedent("""\
        #include <stdio.h>
        #include "first.h"
        #include "second.h"
        FIRST_ARENA(arena_a);
        SECOND_ARENA(arena_b);
        static float x[32], image[490], probs[10], y[12];
        static int64_t label[1];
        int main(void)
        {
            const void *in_a[1] = { x }, *in_b[1] = { image };
            void *out_a[2] = { probs, label }, *out_b[1] = { y };
            int i;
            for (i = 0; i < 32; ++i) x[i] = (float)i / 32.0f;
            for (i = 0; i < 490; ++i) image[i] = (float)(i % 7) / 7.0f;
            first_init(arena_a);
            second_init(arena_b);
            if (first_run(arena_a, in_a, out_a) || second_run(arena_b, in_b, out_b))
                return 1;
            printf("# output 0\\n");
            for (i = 0; i < 10; ++i) printf("%.9g\\n", (double)probs[i]);
            printf("# output 1\\n");
            for (i = 0; i < 12; ++i) printf("%.9g\\n", (double)y[i]);
            return 0;
        }
        """))
    if build == "cc":
        exe = tmp_path / "both"
        sources = [os.path.join(a, "first.c"), os.path.join(a, "first_weights.c"), os.path.join(b, "second.c"),
                   os.path.join(b, "second_weights.c")]
        placement = ['-DFIRST_WEIGHTS_SECTION=".first_weights"', "-DFIRST_ALIGN=64"]
        proc = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *placement, "-I", a, "-I", b,
                               str(main), *sources, "-o", str(exe), "-lm"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        sections = subprocess.run(["objdump", "-h", str(exe)], capture_output=True, text=True, check=True).stdout
        nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
        weights = [int(line.split()[0], 16) for line in nm if " first_w_" in line]
        assert " .first_weights " in sections and weights and all(w % 64 == 0 for w in weights)
    else:
        ensure_tools({"cmake": "cmake"})
        (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent("""\
            cmake_minimum_required(VERSION 3.13)
            project(both C)
            add_subdirectory(first)
            add_subdirectory(second)
            add_executable(both both.c)
            target_link_libraries(both PRIVATE first second)
            """))
        out = tmp_path / "build"
        for cmd in (["cmake", "-S", str(tmp_path), "-B", str(out), "-DFIRST_WERROR=ON", "-DSECOND_WERROR=ON"],
                    ["cmake", "--build", str(out)]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        exe = out / "both"
        assert not (out / "first" / "first_demo").exists()
        alone = tmp_path / "alone"   # a package as the top-level project builds its example program too
        for cmd in (["cmake", "-S", a, "-B", str(alone)], ["cmake", "--build", str(alone)]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert (alone / "first_demo").is_file()
    got = parse_outputs(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
    x = (np.arange(32, dtype=np.float32) / 32).reshape(1, 32)
    image = ((np.arange(490) % 7) / 7).astype(np.float32).reshape(1, 1, 49, 10)
    assert_outputs(got, [run_ort(mlp_model(), {"x": x})[0], run_ort(cnn_model(), {"x": image})[0]])


def test_what_needs_run_time_memory_is_refused_with_its_node(tmp_path):
    nz = make_model([helper.make_node("NonZero", ["x"], ["idx"], name="find")], [("x", TP.FLOAT, [4])],
                    [("idx", TP.INT64, [1, None])])
    with pytest.raises(UnsupportedError, match="NonZero 'find'"):
        compile_model(nz, str(tmp_path / "nz"), CompileOptions(target="c"))
    with pytest.raises(UnsupportedError, match="--dim"):
        compile_model(cnn_model(), str(tmp_path / "sym"), CompileOptions(target="c"))
    with pytest.raises(ValueError, match="one thread"):
        compile_model(mlp_model(), str(tmp_path / "t"), CompileOptions(target="c", threads=2))


def test_the_name_must_be_a_c_identifier(tmp_path):
    """The prefix names symbols, macros and files: through the API as through --name, anything
    but a C identifier of at most 32 characters is refused before a file is written."""
    for bad in ("a-b", "1st", "x;y", "../up", "", "k" * 33, "kws\n#define"):
        with pytest.raises(ValueError, match="C identifier"):
            compile_model(mlp_model(), str(tmp_path / "bad"), CompileOptions(target="c", prefix=bad))
    assert not (tmp_path / "bad").exists()
    path = tmp_path / "m.onnx"
    onnx.save(mlp_model(), str(path))
    assert cli_main(["compile", str(path), "--target", "c", "--name", "../up", "-o", str(tmp_path / "p"), "-q"]) != 0


# --- off the host --------------------------------------------------------------------------------------

def test_arm_linux_under_qemu_prints_what_the_host_prints(tmp_path):
    ensure_tools({"arm-linux-gnueabihf-gcc": "gcc-arm-linux-gnueabihf", "qemu-arm": "qemu-user",
                  "/usr/arm-linux-gnueabihf/lib/libc.a": "libc6-dev-armhf-cross"})
    model = cnn_model()
    feeds = {"x": RNG.standard_normal((1, 1, 49, 10)).astype(np.float32)}
    host = package(tmp_path / "host", model, "kws", "--dim", "N=1")
    arm = package(tmp_path / "arm", model, "kws", "--dim", "N=1")
    make(host)
    make(arm, "CC=arm-linux-gnueabihf-gcc", "AR=arm-linux-gnueabihf-ar", "CFLAGS=-O2 -static")
    with open(os.path.join(arm, "kws_demo"), "rb") as f:
        elf = f.read(20)
    assert elf[:4] == b"\x7fELF" and elf[4] == 1 and int.from_bytes(elf[18:20], "little") == 40  # ELF32, EM_ARM
    inputs = write_inputs(str(tmp_path), feeds)
    on_host = run_demo(host, "kws", inputs)
    on_arm = run_demo(arm, "kws", inputs, runner=("qemu-arm",))
    assert_outputs(on_arm, on_host, rtol=1e-5, atol=1e-6)
    assert_outputs(on_host, run_ort(model, feeds))


def test_cortex_m4_links_freestanding(tmp_path, capsys):
    ensure_tools({"arm-none-eabi-gcc": "gcc-arm-none-eabi", "arm-none-eabi-size": "binutils-arm-none-eabi",
                  "/usr/lib/arm-none-eabi/newlib": "libnewlib-arm-none-eabi"})
    folder = package(tmp_path, cnn_model(), "kws", "--dim", "N=1")
    firmware = tmp_path / "firmware.c"
    firmware.write_text(textwrap.dedent("""\
        #include "kws.h"
        KWS_ARENA(arena);
        static float features[KWS_INPUT_0_COUNT], scores[KWS_OUTPUT_0_COUNT];
        volatile float sink;
        int main(void)
        {
            const void *inputs[1] = { features };
            void *outputs[1] = { scores };
            kws_init(arena);
            if (kws_run(arena, inputs, outputs) != 0)
                return 1;
            sink = scores[0];
            return 0;
        }
        """))
    cpu = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
    elf = tmp_path / "firmware.elf"
    cmd = ["arm-none-eabi-gcc", *cpu, "-Os", "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Werror",
           "-ffreestanding", "-ffunction-sections", "-fdata-sections", "-I", folder, str(firmware),
           os.path.join(folder, "kws.c"), os.path.join(folder, "kws_weights.c"), "--specs=nosys.specs",
           "-Wl,--gc-sections", "-o", str(elf), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    size = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in size.splitlines()[1].split()[:3])
    header = open(os.path.join(folder, "kws.h")).read()
    arena = int(re.search(r"#define KWS_ARENA_BYTES (\d+)u", header).group(1))
    weights = int(re.search(r"#define KWS_WEIGHTS_BYTES (\d+)u", header).group(1))
    assert text >= weights and bss >= arena   # weights in flash, the arena in RAM
    with capsys.disabled():
        print(f"\nCortex-M4 firmware (model + newlib startup): text {text} data {data} bss {bss} bytes; "
              f"arena {arena}, weights {weights}")


# --- conformance ----------------------------------------------------------------------------------------

def _conformance_cases() -> list:
    """Every passing ONNX node case; a fifth of them, the same every run, in CI's slice."""
    import zlib

    from conformance.cases import all_cases, expected_failures
    known = expected_failures()
    return [pytest.param(n, marks=pytest.mark.ci_slice) if zlib.crc32(n.encode()) % 5 == 0 else n
            for n in sorted(all_cases()) if n not in known]


@pytest.mark.conformance
@pytest.mark.package_conformance
@pytest.mark.parametrize("name", _conformance_cases())
def test_conformance_case_as_a_package(name, tmp_path):
    """The case's model as a freestanding package, built strictly and run by its example
    program on the case's inputs. The cases a package cannot hold (run-time sizes, strings,
    sequences) are listed with the reason in expected_package_refusals.txt: a listed case
    xfails with it, a refusal not listed fails, and so does a listed case that builds."""
    from conformance.cases import all_cases
    from conformance.embedded import PACKAGE_REFUSALS, package_refusals, run_case_embedded
    reason = package_refusals().get(name)
    try:
        run_case_embedded(all_cases()[name], str(tmp_path / "pkg"))
    except UnsupportedError as e:
        if reason is None:
            pytest.fail(f"--target c refuses {name}, which is not listed in {os.path.basename(PACKAGE_REFUSALS)}: "
                        f"{str(e)[:300]}", pytrace=False)
        pytest.xfail(f"not embeddable: {reason}")
    if reason is not None:
        pytest.fail(f"{name} builds as a package now but is listed in {os.path.basename(PACKAGE_REFUSALS)} "
                    f"({reason}): remove it", pytrace=False)


def test_the_harness_counts_what_the_program_printed():
    """A program that prints fewer or more outputs, or elements, than the case has fails."""
    from conformance.cases import Mismatch
    from conformance.embedded import parse_printed
    expected = [np.zeros(3, np.float32), np.arange(2, dtype=np.int64)]
    good = "# output 0 y\n0\n0\n0\n# clock 120\n# output 1 z\n0\n1\n"
    assert [a.tolist() for a in parse_printed(good, expected)] == [[0, 0, 0], [0, 1]]
    for bad in ("", "# output 0 y\n0\n0\n0\n", good + "# output 2 w\n", good.replace("0\n0\n0\n", "0\n0\n"),
                "1\n" + good):
        with pytest.raises(Mismatch):
            parse_printed(bad, expected)


# --- bounded dims -----------------------------------------------------------------------------------------

BOUNDED_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "kws.h"
KWS_ARENA(arena);
static float x[KWS_INPUT_0_COUNT], y[KWS_OUTPUT_0_COUNT];
int main(int argc, char **argv)
{
    const int64_t n = argc > 2 ? atoll(argv[1]) : 0;
    int64_t dims[KWS_DIM_COUNT];
    const void *inputs[1] = { x };
    void *outputs[1] = { y };
    FILE *f = fopen(argv[2], "rb");
    size_t count = (size_t)n * (KWS_INPUT_0_COUNT / KWS_DIM_N_MAX), i;
    if (f == NULL || fread(x, sizeof x[0], count, f) != count)
        return 2;
    fclose(f);
    for (i = 0; i < KWS_OUTPUT_0_COUNT; ++i)
        y[i] = 12345.0f;   /* what the run must leave alone beyond n rows */
    kws_init(arena);
    dims[KWS_DIM_N] = n;
    if (kws_run_dims(arena, dims, inputs, outputs) != 0) {
        printf("error: %s\n", kws_error(arena));
        return 0;
    }
    for (i = 0; i < KWS_OUTPUT_0_COUNT; ++i)
        printf("%.9g\n", (double)y[i]);
    return 0;
}
"""


def test_bounded_dim_serves_every_size_up_to_its_bound(tmp_path):
    """--dim N<=4: one package runs batches of 1 to 4 (each equal to onnxruntime), refuses 5,
    and its arena holds a batch of 4."""
    model = cnn_model()
    folder = package(tmp_path, model, "kws", "--dim", "N<=4")
    header = open(os.path.join(folder, "kws.h")).read()
    assert "#define KWS_DIM_N_MAX 4" in header and "#define KWS_INPUT_0_DIMS { 4, 1, 49, 10 }" in header
    make(folder)
    main_c = tmp_path / "bounded.c"
    main_c.write_text(BOUNDED_MAIN)
    exe = str(tmp_path / "bounded")
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I", folder, str(main_c),
                    os.path.join(folder, "libkws.a"), "-lm", "-o", exe], check=True)
    x = RNG.standard_normal((5, 1, 49, 10)).astype(np.float32)
    x.tofile(str(tmp_path / "x.bin"))
    for n in (1, 3, 4):
        out = subprocess.run([exe, str(n), str(tmp_path / "x.bin")], capture_output=True, text=True, check=True).stdout
        got = parse_outputs("# output 0\n" + out)[0]
        assert_outputs([got[:n * 12]], run_ort(model, {"x": x[:n]}))
        assert np.all(got[n * 12:] == 12345.0)
    out = subprocess.run([exe, "5", str(tmp_path / "x.bin")], capture_output=True, text=True, check=True).stdout
    assert out.startswith("error: a dim beyond its bound: N")
    fixed = package(tmp_path / "fixed", model, "kws", "--dim", "N=4")
    fixed_arena = int(re.search(r"KWS_ARENA_BYTES (\d+)u", open(os.path.join(fixed, "kws.h")).read()).group(1))
    arena = int(re.search(r"KWS_ARENA_BYTES (\d+)u", header).group(1))
    assert fixed_arena <= arena


def test_bounded_dim_must_name_an_input_dim(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(cnn_model(), str(path))
    assert cli_main(["compile", str(path), "--target", "c", "--dim", "batch<=4", "-o", str(tmp_path / "p"), "-q"]) != 0
    assert cli_main(["compile", str(path), "--dim", "N<=4", "-o", str(tmp_path / "q"), "-q"]) != 0
