"""The 8-bit GEMM helper (c/helpers/qgemm.c.j2) under each instruction set it has a path for:
built with each one's flags on every machine, run where the CPU (or qemu-aarch64) can run it,
and compared with numpy's int64 products of the same bytes, wrapped to int32 as the ONNX
integer ops define them. The models' tests (tests/ops/test_qlinear_int8.py) check the ops
against onnxruntime on the native build; this checks the paths a native build here does not take.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from onnxc.codegen.templates import render
from onnxc.runtime import cpu
from tools import ensure_tools, is_x86_64, missing

HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#define ONNXC_PARALLEL_FOR _Pragma("omp parallel for schedule(static) if(onnxc_parallel)")
#else
#define ONNXC_PARALLEL_FOR
#endif
#define ONNXC_INLINE static inline
#define ONNXC_HELPER static
#define ONNXC_THREADS 2
#define ONNXC_PARALLEL_MIN_MACS 1
#define ONNXC_PARALLEL_MIN_WORK 1
%s
/* in: int64 M, N, K, a_signed, a_src_signed, b_src_signed; A bytes (M x K); B bytes (K x N);
   int32 za[M], zb[N]. out: int32 C (M x N) and the ISA name. */
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    int64_t h[6];
    if (!f || fread(h, 8, 6, f) != 6) return 2;
    const int64_t M = h[0], N = h[1], K = h[2];
    const int a_signed = (int)h[3], a_src = (int)h[4], b_src = (int)h[5];
    uint8_t *A = malloc(M * K), *B = malloc(K * N);
    int32_t *za = malloc(4 * M), *zb = malloc(4 * N), *C = malloc(4 * M * N);
    if (fread(A, 1, M * K, f) != (size_t)(M * K) || fread(B, 1, K * N, f) != (size_t)(K * N)
        || fread(za, 4, M, f) != (size_t)M || fread(zb, 4, N, f) != (size_t)N) return 3;
    fclose(f);
    /* The unsigned side takes a signed source flipped (+128), the signed side an unsigned one (-128). */
    const int a_flip = a_signed != a_src, b_flip = (!a_signed) != b_src;
    for (int64_t i = 0; i < M; ++i) za[i] += a_flip ? (a_signed ? -128 : 128) : 0;
    for (int64_t j = 0; j < N; ++j) zb[j] += b_flip ? (a_signed ? 128 : -128) : 0;
    uint8_t *Ap = malloc(onnxc_qgemm_a_bytes(M, K)), *Bp = malloc(onnxc_qgemm_b_bytes(N, K));
    int32_t *ra = malloc(4 * M), *cb = malloc(4 * N);
    onnxc_qgemm_pack_a(M, K, A, K, 1, a_flip ? 0x80 : 0, a_signed, Ap, ra);
    onnxc_qgemm_pack_b(N, K, B, N, 1, b_flip ? 0x80 : 0, !a_signed, Bp, cb);
    onnxc_qgemm(M, N, K, a_signed, Ap, ra, za, 1, Bp, cb, zb, 1, C, N);
    f = fopen(argv[2], "wb");
    fwrite(C, 4, M * N, f);
    fclose(f);
    puts(ONNXC_QGEMM_ISA);
#ifdef ONNXC_QGEMM_AMX
    puts(onnxc_amx_state > 0 ? "tiles granted" : "tiles refused");
#endif
    return 0;
}
"""

# name -> (compiler, flags, the path the helper must take, CPU features (or "qemu") to run it)
BUILDS = {
    "amx-int8": ("gcc", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma", "-mamx-tile",
                         "-mamx-int8"], "amx-int8", {"avx512f", "avx512_vnni", "amx_tile", "amx_int8"}),
    "avx512vnni": ("gcc", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma"], "avx512vnni",
                   {"avx512f", "avx512_vnni"}),
    "avxvnni": ("gcc", ["-mavx2", "-mfma", "-mavxvnni"], "avxvnni", {"avx2", "avx_vnni"}),
    "avx512bw": ("gcc", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mfma"], "avx2", {"avx512f", "avx512bw"}),
    "avx2": ("gcc", ["-mavx2", "-mfma"], "avx2", {"avx2"}),
    "portable": ("gcc", [], "portable", set()),
    "neon-dotprod": ("aarch64-linux-gnu-gcc", ["-march=armv8.2-a+dotprod", "-static"], "neon-dotprod", "qemu"),
    "neon": ("aarch64-linux-gnu-gcc", ["-march=armv8-a", "-static"], "portable", "qemu"),
}

# (M, N, K): tile edges (MR 8, NR 32), K not a multiple of 4, one row, one column; for AMX's tiles
# blocks of 16 rows and a last 8, K in whole steps of 64 bytes and with a rest
SHAPES = [(1, 1, 1), (1, 45, 7), (8, 32, 4), (9, 33, 13), (17, 64, 130), (3, 100, 255), (40, 5, 64),
          (16, 32, 64), (24, 31, 68), (50, 70, 200), (64, 96, 256)]


def _build(tmp_path, name: str) -> tuple[str, list[str]]:
    cc, flags, _, _ = BUILDS[name]
    if cc.startswith("aarch64"):
        ensure_tools({cc: "gcc-aarch64-linux-gnu", "qemu-aarch64": "qemu-user",
                      "/usr/aarch64-linux-gnu/lib/libc.a": "libc6-dev-arm64-cross"})
    elif not is_x86_64():
        pytest.skip("x86 builds: this machine is not x86-64")
    elif shutil.which(cc) is None:
        missing(f"needs {cc}")
    source = tmp_path / "qgemm.c"
    source.write_text(HARNESS % render("c/helpers/qgemm.c.j2", {"embedded": False, "declare_only": False}))
    exe = str(tmp_path / "qgemm")
    omp = [] if cc.startswith("aarch64") else ["-fopenmp"]
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", *flags, *omp, str(source), "-o", exe],
                   check=True, capture_output=True, text=True)
    features = BUILDS[name][3]
    if features == "qemu":
        return exe, ["qemu-aarch64"]
    have = cpu.host_features() or frozenset()
    if not features <= have:
        return exe, []
    return exe, [""]


@pytest.mark.parametrize("name", BUILDS)
def test_each_path_builds_and_computes_the_exact_int32_sums(tmp_path, name):
    exe, runner = _build(tmp_path, name)
    if not runner:
        pytest.skip(f"built; this CPU lacks {sorted(BUILDS[name][3])} to run it")
    rng = np.random.default_rng(7)
    for m, n, k in SHAPES:
        for a_signed in (0, 1):
            for a_src, b_src in ((0, 1), (1, 1), (0, 0), (1, 0)):
                a = rng.integers(0, 256, (m, k), dtype=np.uint8)
                b = rng.integers(0, 256, (k, n), dtype=np.uint8)
                za = rng.integers(-128, 128, m) if a_src else rng.integers(0, 256, m)
                zb = rng.integers(-128, 128, n) if b_src else rng.integers(0, 256, n)
                av = a.view(np.int8) if a_src else a
                bv = b.view(np.int8) if b_src else b
                want = ((av.astype(np.int64) - za[:, None]) @ (bv.astype(np.int64) - zb[None, :])).astype(np.int32)
                feed = tmp_path / "in.bin"
                feed.write_bytes(np.array([m, n, k, a_signed, a_src, b_src], np.int64).tobytes() + a.tobytes()
                                 + b.tobytes() + za.astype(np.int32).tobytes() + zb.astype(np.int32).tobytes())
                cmd = [c for c in (*runner, exe) if c] + [str(feed), str(tmp_path / "out.bin")]
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                assert run.returncode == 0, run.stderr
                said = run.stdout.splitlines()
                assert said[0] == BUILDS[name][2]
                if name == "amx-int8":
                    # (Linux lends the tile state on request; a refusal would leave the vector kernel)
                    assert said[1] == "tiles granted", run.stdout
                got = np.fromfile(tmp_path / "out.bin", np.int32).reshape(m, n)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {m}x{n}x{k} a_signed={a_signed} "
                                              f"a_src={a_src} b_src={b_src}")


def test_the_sums_wrap_as_int32_does(tmp_path):
    """K large enough that the exact sum leaves int32: the helper gives its int32 wrap."""
    exe, runner = _build(tmp_path, "portable")
    m, n, k = 2, 3, 140000
    a = np.full((m, k), 255, np.uint8)
    b = np.full((k, n), 0x80, np.uint8)          # int8 -128
    feed = tmp_path / "in.bin"
    feed.write_bytes(np.array([m, n, k, 0, 0, 1], np.int64).tobytes() + a.tobytes() + b.tobytes()
                     + np.zeros(m, np.int32).tobytes() + np.zeros(n, np.int32).tobytes())
    subprocess.run([exe, str(feed), str(tmp_path / "out.bin")], check=True, capture_output=True)
    got = np.fromfile(tmp_path / "out.bin", np.int32)
    assert (got == np.int32(np.int64(255 * -128 * k) % (1 << 32) - (1 << 32))).all()
