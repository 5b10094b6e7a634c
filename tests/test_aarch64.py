"""AArch64 under qemu-aarch64 (user-mode emulation), compared with this host.

- The native build's NEON path: the model generated for ``aarch64-linux-gnu-gcc -march=armv8-a``
  (weights packed for the NEON GEMM tile, the NEON kernels of c/helpers/simd.c.j2) and linked
  statically with a small driver that loads weights.bin, runs the model and prints the
  outputs; they must equal what onnxc's session prints on this host.
- A ``--target c`` package cross-built with its Makefile: it must print what the same package
  prints on this host.

Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user are installed when missing;
a missing one fails under ONNXC_REQUIRE_TOOLS=1. About 15 s on 2 cores."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from helpers import run_onnxc
from onnxc.codegen.toolchain import Toolchain
from onnxc.driver import CompileOptions, generate_source
from test_blocked_layout import resnet_like
from test_fusion import EPILOGUE_ACTIVATIONS, every_epilogue_model
from test_gemm_tails import (column_tails_feeds, column_tails_model, linear_feeds, linear_model, row_tails_feeds,
                             row_tails_model)
from test_embedded import (assert_outputs, blocked_model, cnn_model, make, mlp_model, package, parse_outputs, run_demo,
                           write_inputs)
from tools import ensure_tools

CC = "aarch64-linux-gnu-gcc"
MARCH = "armv8-a"
EM_AARCH64 = 183


@pytest.fixture(scope="module", autouse=True)
def _tools():
    ensure_tools({CC: "gcc-aarch64-linux-gnu", "qemu-aarch64": "qemu-user",
                  "/usr/aarch64-linux-gnu/lib/libc.a": "libc6-dev-arm64-cross"})


def _is_aarch64(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(20)
    return head[:4] == b"\x7fELF" and head[4] == 2 and int.from_bytes(head[18:20], "little") == EM_AARCH64


DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    void *buf;
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        exit(2);
    buf = aligned_alloc(64, ((size_t)n + 64) / 64 * 64);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n)
        exit(2);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

int main(int argc, char **argv)
{
    static const int64_t in_shapes[] = { %(in_shapes)s };
    static const size_t out_counts[] = { %(out_counts)s };
    const void *inputs[%(n_in)d];
    void *outputs[%(n_out)d];
    int64_t out_shapes[%(out_dims)d + 1];
    size_t weights_size, size, i, k;
    void *weights = read_file(argv[1], &weights_size), *ctx = malloc(model_context_size());
    if (argc != 2 + %(n_in)d || ctx == NULL)
        return 2;
    for (i = 0; i < %(n_in)d; ++i)
        inputs[i] = read_file(argv[2 + i], &size);
    if (model_context_init(ctx, weights, weights_size) != 0 || model_run(ctx, inputs, in_shapes, outputs, out_shapes) != 0) {
        fprintf(stderr, "%%s\n", model_error(ctx));
        return 1;
    }
    for (k = 0; k < %(n_out)d; ++k) {
        printf("# output %%d\n", (int)k);
        for (i = 0; i < out_counts[k]; ++i)
            printf("%%.9g\n", (double)((const float *)outputs[k])[i]);
    }
    return 0;
}
"""


def _models() -> dict[str, tuple]:
    rng = np.random.default_rng(21)
    return {
        "mlp": (mlp_model(), {"x": rng.standard_normal((1, 32)).astype(np.float32)}),
        "kws": (cnn_model(batch=1), {"x": rng.standard_normal((1, 1, 49, 10)).astype(np.float32)}),
        # GEMMs past the NEON tile (12 x 8) and the cache blocks in every direction
        "blocked": (blocked_model(), {"x": rng.standard_normal((1, 32, 20, 20)).astype(np.float32),
                                      "a": rng.standard_normal((20, 200)).astype(np.float32)}),
        # every activation in the GEMM tile's registers (NEON exp and tanh) and its edge loops
        "epilogues": (every_epilogue_model(), {f"x{i}": rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
                                               for i in range(len(EPILOGUE_ACTIVATIONS))}
                      | {"r": rng.standard_normal((1, 16, 7, 7)).astype(np.float32) * 4}),   # (the model's order)
        # every remainder of the 8-column tile: half tiles and single columns
        "tails": (column_tails_model(), column_tails_feeds()),
        # every remainder of the 12-row panel, the epilogue after the last rows' tiles
        "row_tails": (row_tails_model(), row_tails_feeds()),
        # a Linear layer's weights as they are: NEON dot products of contiguous columns (vaddvq_f32)
        "linear": (linear_model(), linear_feeds()),
        # the channels-blocked convolutions and pools: NEON's tile of 1 block (4 vectors) x 6 positions
        "channels_blocked": resnet_like(1, 64),
    }


@pytest.mark.parametrize("name", ["mlp", "kws", "blocked", "epilogues", "tails", "row_tails", "linear",
                                  "channels_blocked"])
def test_native_neon_build_under_qemu_prints_what_the_host_computes(tmp_path, monkeypatch, name):
    model, feeds = _models()[name]
    host = run_onnxc(model, feeds)   # (this machine's build, before CC names the cross compiler)
    monkeypatch.setenv("CC", CC)
    options = CompileOptions(march=MARCH)
    toolchain = options.toolchain()
    assert toolchain.simd() == "neon"
    emitted = generate_source(model, options)
    for unit, text in {"model.c": emitted.source, **emitted.units}.items():   # (node functions in units of their own)
        (tmp_path / unit).write_text(text)
    (tmp_path / "model.h").write_text(emitted.header)
    (tmp_path / "weights.bin").write_bytes(bytes(emitted.weights))
    for unit, text in emitted.helper_units.items():   # (the GEMM's and Winograd's, linked as objects)
        (tmp_path / unit).write_text(text)
    keep = [i for i, o in enumerate(host) if o.dtype == np.float32]
    shapes = [d for v in feeds.values() for d in v.shape]
    (tmp_path / "driver.c").write_text(DRIVER % {
        "in_shapes": ", ".join(map(str, shapes)), "n_in": len(feeds), "n_out": len(host),
        "out_counts": ", ".join(str(o.size if i in keep else 0) for i, o in enumerate(host)),
        "out_dims": sum(o.ndim for o in host)})
    flags = [f for f in Toolchain(cc=CC, march=MARCH).flags() if f not in ("-shared", "-fPIC", "-fvisibility=hidden")]
    exe = str(tmp_path / "run")
    helpers = [str(tmp_path / unit) for unit in emitted.helper_units]
    units = [str(tmp_path / unit) for unit in {"model.c": None, **emitted.units} if unit.endswith(".c")]
    proc = subprocess.run([CC, *flags, "-I", str(tmp_path), *units, *helpers,
                           str(tmp_path / "driver.c"), "-static", "-o", exe, "-lm"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert _is_aarch64(exe)
    paths = write_inputs(str(tmp_path), feeds)
    run = subprocess.run(["qemu-aarch64", exe, str(tmp_path / "weights.bin"), *paths], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    printed = parse_outputs(run.stdout)
    assert keep and len(printed) == len(host)
    assert_outputs([printed[i] for i in keep], [host[i] for i in keep], rtol=1e-5, atol=1e-5)


def test_package_under_qemu_aarch64_prints_what_the_host_prints(tmp_path):
    model, feeds = _models()["kws"]
    host = package(tmp_path / "host", model, "kws")
    arm = package(tmp_path / "arm", model, "kws")
    make(host)
    make(arm, f"CC={CC}", "AR=aarch64-linux-gnu-ar", "CFLAGS=-O2 -static")
    assert _is_aarch64(os.path.join(arm, "kws_demo"))
    inputs = write_inputs(str(tmp_path), feeds)
    assert_outputs(run_demo(arm, "kws", inputs, runner=("qemu-aarch64",)), run_demo(host, "kws", inputs),
                   rtol=1e-5, atol=1e-6)
