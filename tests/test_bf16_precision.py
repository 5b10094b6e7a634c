"""Precision "bf16" (session.onnxc.precision, onnxc compile --precision): the float32 GEMM's
products in bfloat16 with float32 sums (c/helpers/sgemm.c.j2, AVX512-BF16).

The option: never on by default, part of the cache key, refused where the target CPU lacks the
instructions and for packages and CUDA builds. The kernel: built with AVX512-BF16 flags on every
x86-64 machine and run where the CPU has them (as tests/test_qgemm_isa.py does), against numpy's
product of the operands rounded to bfloat16 (ml_dtypes, round to nearest even). The models: a
MatMul and a small convolution net against onnxruntime's float32 within bfloat16's rounding.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model, run_ort
from onnxc import cli, driver
from onnxc.codegen import c_emitter, helper_objects
from onnxc.codegen.kernel import Target
from onnxc.codegen.toolchain import Toolchain
from onnxc.compiler.errors import InvalidArgument
from onnxc.compiler.ops import _gemm
from onnxc.runtime import cpu
from onnxc.runtime.options import CONFIG_KEYS, PRECISION_KEY
from tools import is_x86_64, missing, require_module

# The CPU features the bf16 kernel runs on, and the flags that build it on any x86-64 machine.
FEATURES = frozenset(driver.BF16_FEATURES)
FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma"]
# What a relative error of bfloat16's rounding is at most (8 significant bits, to nearest).
BF16_EPS = 2.0 ** -8


def have_bf16() -> bool:
    return FEATURES <= (cpu.host_features() or frozenset())


def lacking() -> str:
    return f"this CPU lacks {sorted(FEATURES - (cpu.host_features() or frozenset()))}"


def bf16(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 (nearest even), back in float64."""
    ml_dtypes = require_module("ml_dtypes")
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


def bf16_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A B of the operands rounded to bfloat16, exactly (float64), and a bound on what float32
    sums of K products may add to it: K float32 roundings of partial sums at most |A| |B|."""
    k = a.shape[1]
    exact = bf16(a) @ bf16(b)
    bound = (np.abs(bf16(a)) @ np.abs(bf16(b))) * k * 2.0 ** -24 + 1e-30
    return exact, bound


def pretend_cpu(monkeypatch, features) -> None:
    """The build's target CPU resolves to ``features`` (what -march gives on such a machine)."""
    monkeypatch.setattr(Toolchain, "isa", lambda self: sorted(features))


def matmul_model(m: int, k: int, n: int, seed: int = 0) -> tuple[onnx.ModelProto, np.ndarray]:
    w = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", T.FLOAT, [m, k])],
                       [("y", T.FLOAT, [m, n])], [onnx.numpy_helper.from_array(w, "w")])
    return model, w


def conv_net() -> onnx.ModelProto:
    """3x3 convolutions (Winograd's), a strided one, a 1x1 one, bias and Relu, and a fully
    connected layer: the paths of the float32 GEMM a CNN takes."""
    rng = np.random.default_rng(3)

    def init(name, *shape):
        return onnx.numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(
            np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["c3"]),
             helper.make_node("Conv", ["c3", "w4"], ["c4"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c4"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [init("w1", 24, 3, 3, 3), init("b1", 24), init("w2", 40, 24, 3, 3), init("b2", 40),
             init("w3", 33, 40, 1, 1), init("w4", 32, 33, 3, 3), init("wf", 10, 32), init("bf", 10)]
    return make_model(nodes, [("x", T.FLOAT, [2, 3, 30, 30])], [("y", T.FLOAT, [2, 10])], inits)


def bf16_session(model: onnx.ModelProto, threads: int = 1) -> onnxc.InferenceSession:
    so = onnxc.SessionOptions()
    so.add_session_config_entry(PRECISION_KEY, "bf16")
    so.intra_op_num_threads = threads
    return onnxc.InferenceSession(model.SerializeToString(), so)


# --- the option ---------------------------------------------------------------------------------

def test_fp32_is_the_default_and_bf16_a_key_of_its_own():
    assert driver.CompileOptions().precision == "fp32"
    assert driver.CompileOptions(precision="bf16").key() != driver.CompileOptions().key()
    assert PRECISION_KEY in CONFIG_KEYS   # (a known key: no warning)


def test_the_default_build_has_no_bfloat16_kernel(monkeypatch):
    pretend_cpu(monkeypatch, Toolchain().isa() + list(FEATURES))
    model, _ = matmul_model(16, 64, 40)
    fp32 = driver.generate_source(model, driver.CompileOptions())
    assert "onnxc_sgemm_bf16_tile" not in fp32.helper_units["helpers_gemm.c"]
    bf = driver.generate_source(model, driver.CompileOptions(precision="bf16"))
    assert "onnxc_sgemm_bf16_tile" in bf.helper_units["helpers_gemm.c"]


def test_refused_where_the_target_cpu_lacks_avx512_bf16(monkeypatch):
    pretend_cpu(monkeypatch, ["avx2", "fma", "avx512f", "avx512bw"])
    model, _ = matmul_model(8, 16, 8)
    with pytest.raises(InvalidArgument, match="avx512_bf16") as e:
        bf16_session(model)
    assert "lacks avx512_bf16" in str(e.value) and "fp32" in str(e.value)
    # (fp32 on the same CPU compiles)
    assert driver.generate_source(model, driver.CompileOptions()).helper_units


def test_compile_command_refuses_bf16_where_the_cpu_lacks_it(monkeypatch, tmp_path, capsys):
    pretend_cpu(monkeypatch, ["avx2", "fma"])
    model, _ = matmul_model(8, 16, 8)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    code = cli.main(["compile", str(path), "-o", str(tmp_path / "out"), "--precision", "bf16", "-q"])
    assert code != 0
    assert "avx512_bf16" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_packages_and_cuda_builds_refuse_bf16(monkeypatch, target):
    pretend_cpu(monkeypatch, Toolchain().isa() + list(FEATURES))
    model, _ = matmul_model(8, 16, 8)
    with pytest.raises(InvalidArgument, match=f"not with --target {target}"):
        driver.generate_source(model, driver.CompileOptions(target=target, precision="bf16", cuda_emulate=True))


def test_an_unknown_precision_is_refused():
    model, _ = matmul_model(8, 16, 8)
    so = onnxc.SessionOptions()
    so.add_session_config_entry(PRECISION_KEY, "fp16")
    with pytest.raises(InvalidArgument, match="fp32, bf16"):
        onnxc.InferenceSession(model.SerializeToString(), so)


def test_winograd_products_stay_float32_in_bf16(monkeypatch):
    """Winograd's products are of transformed tiles, whose rounding the inverse transform
    amplifies (in bfloat16, ResNet-50's logits were 40% off): a bf16 build keeps them float32."""
    pretend_cpu(monkeypatch, Toolchain().isa() + list(FEATURES))
    bf = driver.generate_source(conv_net(), driver.CompileOptions(precision="bf16"))
    winograd = [text for name, text in bf.helper_units.items() if "winograd" in name]
    assert winograd and all("onnxc_sgemm_serial_f32(k1 - k0" in text and "onnxc_sgemm_serial(k1 - k0" not in text
                            for text in winograd)
    assert "ONNXC_HELPER void onnxc_sgemm_serial_f32(" in bf.helper_units["helpers_gemm.c"]


# --- the kernel ---------------------------------------------------------------------------------

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
%s
/* in: int64 M, N, K, variant; A (M x K), B (K x N), then Ap (packed rows) and Bp (packed
   columns) as the compiler packs them. out: C (M x N). variant 0: A and B as they are; 1: B
   packed; 2: A packed; 3: B packed, C accumulated onto 1, a column bias and Relu. */
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    int64_t h[4];
    if (argc != 3 || !f || fread(h, 8, 4, f) != 4) return 2;
    const int64_t M = h[0], N = h[1], K = h[2], variant = h[3];
    const int64_t mp = (M + ONNXC_SGEMM_MR - 1) / ONNXC_SGEMM_MR * ONNXC_SGEMM_MR;
    const int64_t np_ = (N + ONNXC_SGEMM_NR - 1) / ONNXC_SGEMM_NR * ONNXC_SGEMM_NR;
    float *A = malloc(4 * (M * K + 1)), *B = malloc(4 * (K * N + 1)), *C = malloc(4 * (M * N + 1));
    float *Ap = malloc(4 * (mp * K + 1)), *Bp = malloc(4 * (np_ * K + 1)), *bias = malloc(4 * (N + 1));
    float *pack = malloc(4 * (onnxc_sgemm_pack_floats(M, N, K) + 1));
    if (fread(A, 4, M * K, f) != (size_t)(M * K) || fread(B, 4, K * N, f) != (size_t)(K * N)
        || fread(Ap, 4, mp * K, f) != (size_t)(mp * K) || fread(Bp, 4, np_ * K, f) != (size_t)(np_ * K)
        || fread(bias, 4, N, f) != (size_t)N) return 3;
    fclose(f);
    onnxc_epilogue epi = {NULL, bias, NULL, 0, ONNXC_ACT_RELU, 0.0f, 0.0f};
    if (variant == 0)
        onnxc_sgemm(M, N, K, A, K, 1, NULL, B, N, 1, NULL, C, N, pack, 0, NULL);
    else if (variant == 1)
        onnxc_sgemm(M, N, K, A, K, 1, NULL, Bp, 0, 0, Bp, C, N, pack, 0, NULL);
    else if (variant == 2)
        onnxc_sgemm(M, N, K, Ap, K, 1, Ap, B, N, 1, NULL, C, N, pack, 0, NULL);
    else {
        for (int64_t i = 0; i < M * N; ++i)
            C[i] = 1.0f;
        onnxc_sgemm(M, N, K, A, K, 1, NULL, Bp, 0, 0, Bp, C, N, pack, 1, &epi);
    }
    f = fopen(argv[2], "wb");
    fwrite(C, 4, M * N, f);
    fclose(f);
#ifdef ONNXC_SGEMM_AMX
    puts(onnxc_amx_state > 0 ? "tiles granted" : onnxc_amx_state < 0 ? "tiles refused" : "tiles not asked");
#endif
    return 0;
}
"""

# (M, N, K): whole tiles; odd K (one pair padded); the last rows (8, 4, 2, 1) and columns of a
# block; K over one block with an odd rest; M and N over a block (MC 192, NC 512); few rows
# (M < 4: float32, the weights streamed once).
SHAPES = [(12, 32, 2), (12, 32, 1), (13, 33, 3), (27, 70, 257), (4, 5, 600), (200, 530, 300), (3, 40, 50)]


# The AMX build of the same kernel (tdpbf16ps tiles; c/helpers/amx.c.j2), run where the CPU has AMX.
AMX_FLAGS = [*FLAGS, "-mamx-tile", "-mamx-bf16"]
AMX_FEATURES = FEATURES | {"amx_tile", "amx_bf16"}


def _build_kernel(tmp_path, flags=FLAGS) -> str:
    if not is_x86_64():
        pytest.skip("an AVX512-BF16 kernel: this machine is not x86-64")
    if shutil.which("gcc") is None:
        missing("needs gcc")
    # (the data of a 1-thread bf16 build's helper object, as the emitter makes it)
    data = c_emitter._helper_unit_data(c_emitter.EmitOptions(version="test", target=Target(precision="bf16")), set())
    unit = helper_objects.helper_units([_gemm.HELPER], data)[helper_objects.unit_name(_gemm.HELPER)]
    source = tmp_path / "bf16_gemm.c"
    source.write_text(HARNESS % unit)
    exe = str(tmp_path / "bf16_gemm")
    subprocess.run(["gcc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, str(source), "-o", exe,
                    "-lm"], check=True, capture_output=True, text=True)
    return exe


@pytest.mark.parametrize("tiles", [False, True], ids=["avx512_bf16", "amx"])
def test_the_kernel_computes_products_of_bfloat16_operands_in_float32(tmp_path, tiles):
    exe = _build_kernel(tmp_path, AMX_FLAGS if tiles else FLAGS)
    needed = AMX_FEATURES if tiles else FEATURES
    have = cpu.host_features() or frozenset()
    if not needed <= have:
        pytest.skip(f"built; this CPU lacks {sorted(needed - have)} to run it")
    rng = np.random.default_rng(11)
    for m, n, k in SHAPES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        packed = (_gemm.pack_rows(a, 12).tobytes() + _gemm.pack_cols(b, 32).tobytes())
        for variant in range(4):
            feed = tmp_path / "in.bin"
            feed.write_bytes(np.array([m, n, k, variant], np.int64).tobytes() + a.tobytes() + b.tobytes()
                             + packed + bias.tobytes())
            run = subprocess.run([exe, str(feed), str(tmp_path / "out.bin")], capture_output=True, text=True,
                                 timeout=120)
            assert run.returncode == 0, run.stderr
            if tiles and (m >= _gemm.FEW_ROWS or variant == 2):
                # (Linux lends the tile state on request; a refusal would leave the vector kernel)
                assert run.stdout.strip() == "tiles granted", run.stdout
            got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(m, n).astype(np.float64)
            if m < _gemm.FEW_ROWS and variant != 2:   # float32 throughout
                want = a.astype(np.float64) @ b.astype(np.float64)
                bound = (np.abs(a) @ np.abs(b)).astype(np.float64) * k * 2.0 ** -24 + 1e-30
            else:
                want, bound = bf16_product(a, b)
            if variant == 3:
                want, bound = np.maximum(want + 1.0 + bias, 0.0), bound + 4 * 2.0 ** -24 * np.abs(want + 1.0 + bias)
            err = np.abs(got - want)
            assert (err <= bound).all(), (f"{m}x{n}x{k} variant {variant}: error {err.max():.3g} over the bound "
                                          f"at {np.unravel_index(np.argmax(err - bound), err.shape)}")
            if m >= _gemm.FEW_ROWS or variant == 2:   # (and it is not float32's product)
                exact32 = a.astype(np.float64) @ b.astype(np.float64)
                assert np.abs(got - (np.maximum(exact32 + 1.0 + bias, 0.0) if variant == 3 else exact32)).max() \
                    > 1e-4 * np.abs(exact32).max()


# --- models against onnxruntime -----------------------------------------------------------------

def _models_need_bf16() -> None:
    if not have_bf16():
        pytest.skip(f"{lacking()}: the session refuses bf16 here "
                    "(test_refused_where_the_target_cpu_lacks_avx512_bf16)")


@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_model_as_numpy_with_bfloat16_operands(threads):
    """Two threads: bands of rows or columns, each packing and converting into its own scratch."""
    _models_need_bf16()
    model, w = matmul_model(50, 300, 700)
    x = np.random.default_rng(5).standard_normal((50, 300)).astype(np.float32)
    got = bf16_session(model, threads).run(None, {"x": x})[0].astype(np.float64)
    want, bound = bf16_product(x, w)
    assert (np.abs(got - want) <= bound).all()
    # against onnxruntime's float32: each product's two roundings, at most 2 * 2^-8 relative
    fp32 = run_ort(model, {"x": x})[0].astype(np.float64)
    assert (np.abs(got - fp32) <= 2 * BF16_EPS * (np.abs(x) @ np.abs(w)) + bound).all()


def test_conv_net_against_onnxruntime_float32():
    """Tolerance: bfloat16 keeps 8 significant bits, so each layer's products are off by up to
    2^-7 relative, errors that partly cancel over the sums and pass through four layers; the
    outputs (of order 1) are to be within 0.03 + 3% of onnxruntime's float32 ones, and much
    closer than that on average. A float32 mistake (a wrong tap, a lost bias) is far above it."""
    _models_need_bf16()
    model = conv_net()
    x = np.random.default_rng(9).standard_normal((2, 3, 30, 30)).astype(np.float32)
    got = bf16_session(model).run(None, {"x": x})[0]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=0.03, atol=0.03)
    assert np.abs(got - want).mean() < 0.01 * np.abs(want).mean()
    assert not np.array_equal(got, onnxc.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0])


def test_compiled_bf16_artifact_says_so(tmp_path, capsys):
    """`onnxc compile --precision bf16`: the folder runs in bf16, and says so to a session that
    opens it (get_session_options) and to `onnxc info`."""
    _models_need_bf16()
    model, w = matmul_model(16, 64, 40)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out"), "--precision", "bf16", "--threads", "1",
                     "-q"]) == 0
    sess = onnxc.InferenceSession(str(tmp_path / "out"))
    assert sess.get_session_options().get_session_config_entry(PRECISION_KEY) == "bf16"
    x = np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32)
    want, bound = bf16_product(x, w)
    assert (np.abs(sess.run(None, {"x": x})[0] - want) <= bound).all()
    capsys.readouterr()
    assert cli.main(["info", str(tmp_path / "out")]) == 0
    assert "precision: bf16" in capsys.readouterr().out
