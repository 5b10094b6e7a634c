"""The x86 build matrix: AVX2 (x86-64-v3) and AVX-512 (x86-64-v4) code, built on every machine
and run wherever the CPU can run it, so that no SIMD path goes untested because the machine a
developer or CI has lacks it; artifacts record the CPU features they need, and one built for
features this CPU lacks is refused with the list, never loaded into an illegal instruction.
"""
from __future__ import annotations

import json
import zlib

import numpy as np
import onnx
import pytest

import onnxc
from conformance.cases import all_cases, expected_failures, run_case
from helpers import run_ort
from models import light_model_path, with_random_weights
from test_gemm_tails import (assert_column_tails, assert_linear, assert_row_tails, column_tails_expected,
                             column_tails_feeds, column_tails_model, linear_expected, linear_feeds, linear_model,
                             row_tails_feeds, row_tails_model)
from onnxc.codegen import toolchain as tc
from onnxc.runtime import cpu
from tools import is_x86_64

pytestmark = pytest.mark.skipif(not is_x86_64(), reason="the x86 build matrix: this machine is not x86-64")

# -march level -> (the float32 SIMD family its kernels compile to, features it must record)
ISAS = {"x86-64-v3": ("avx2", {"avx", "avx2", "fma", "f16c", "bmi2"}),
        "x86-64-v4": ("avx512f", {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"})}

# The conformance slice: two cases of each kernel family with SIMD code paths (GEMM,
# convolution, pooling, normalizations, softmax, attention, recurrent, elementwise maps),
# picked by a fixed hash of their names.
SIMD_FAMILIES = ("conv", "gemm", "matmul", "softmax", "layer_normalization", "batchnorm", "averagepool", "maxpool",
                 "relu", "sigmoid", "gelu", "tanh", "test_add", "test_mul", "reduce_sum", "reduce_mean",
                 "instancenorm", "attention", "lstm", "gru")
EXPECTED = expected_failures()
SLICE = sorted({name for family in SIMD_FAMILIES
                for name in sorted((n for n in all_cases() if family in n and n not in EXPECTED),
                                   key=lambda n: zlib.crc32(n.encode()))[:2]})
ZOO = ["light_squeezenet", "light_shufflenet"]


def runs_here(isa: str) -> bool:
    return not cpu.missing_features(tc.Toolchain(march=isa).isa())


def test_the_slice_is_a_real_sample():
    assert len(SLICE) >= 30, len(SLICE)


@pytest.mark.parametrize("isa", ISAS)
def test_each_level_compiles_to_its_simd_family_and_records_its_features(isa, tmp_path):
    family, features = ISAS[isa]
    toolchain = tc.Toolchain(march=isa)
    assert toolchain.simd() == family
    assert features <= set(toolchain.isa())
    assert f"isa={','.join(toolchain.isa())}" in toolchain.identity()


def test_native_builds_record_only_features_this_cpu_has():
    """Also checks the cpuinfo spelling of every feature the compiler enables here: a wrong name
    would make every native artifact refuse to load."""
    assert cpu.host_features() is not None
    assert set(tc.Toolchain(march="native").isa()) <= cpu.host_features()
    assert tc.Toolchain(march="native").isa(), "a native x86-64 build records its features"


@pytest.mark.conformance
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", SLICE)
def test_conformance_slice(isa, name, tmp_path):
    """Built for ``isa`` everywhere; run where the CPU has its features, and elsewhere refused
    at load with the features it lacks."""
    case = all_cases()[name]
    if runs_here(isa):
        run_case(case, str(tmp_path / "artifact"), march=isa)
        return
    with pytest.raises(onnxc.ModelError, match="compiled for CPU features this machine lacks"):
        run_case(case, str(tmp_path / "artifact"), march=isa)
    manifest = json.loads((tmp_path / "artifact" / "manifest.json").read_text())
    assert set(ISAS[isa][1]) <= set(manifest["isa"])


def _built_for(isa: str, model: onnx.ModelProto, tmp_path) -> "onnxc.InferenceSession | None":
    """A session of ``model`` built for ``isa``; None where this CPU lacks its features (the
    artifact is then refused at load, naming them)."""
    folder = str(tmp_path / "artifact")
    onnxc.compile_model(model, folder, onnxc.CompileOptions(march=isa))
    if not runs_here(isa):
        with pytest.raises(onnxc.ModelError, match="compiled for CPU features this machine lacks"):
            onnxc.InferenceSession(folder)
        return None
    return onnxc.InferenceSession(folder)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", ZOO)
def test_light_zoo(isa, name, tmp_path):
    model = with_random_weights(onnx.load(light_model_path(name)))
    sess = _built_for(isa, model, tmp_path)
    if sess is None:
        return
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).standard_normal(inp.shape).astype(np.float32)
    got, want = sess.run(None, {inp.name: x}), run_ort(model, {inp.name: x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))


@pytest.mark.parametrize("isa", ISAS)
def test_gemm_column_tails(isa, tmp_path):
    """Each family's half tile and column kernel (AVX2: 16-column tiles, AVX-512: 32), for
    every remainder of columns."""
    model, feeds = column_tails_model(), column_tails_feeds()
    sess = _built_for(isa, model, tmp_path)
    if sess is not None:
        assert_column_tails(sess.run(None, feeds), column_tails_expected(model, feeds))


@pytest.mark.parametrize("isa", ISAS)
def test_gemm_row_tails(isa, tmp_path):
    """Each family's tile for every number of last rows (AVX2: panels of 6, AVX-512: 12), the
    epilogue applied after them."""
    model, feeds = row_tails_model(), row_tails_feeds()
    sess = _built_for(isa, model, tmp_path)
    if sess is not None:
        assert_row_tails(model, feeds, sess.run(None, feeds), isa)


@pytest.mark.parametrize("isa", ISAS)
def test_linear_weights_as_they_are(isa, tmp_path):
    """Each family's dot products of a row with contiguous columns (onnxc_sgemm_few_rows, its
    lanes summed by onnxc_vsum), four columns at a time and the last ones, every tail of k."""
    model, feeds = linear_model(), linear_feeds()
    sess = _built_for(isa, model, tmp_path)
    if sess is not None:
        assert_linear(sess.run(None, feeds), linear_expected(model, feeds))


def small_model() -> onnx.ModelProto:
    from helpers import make_model
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32), "w")
    return make_model([onnx.helper.make_node("MatMul", ["x", "w"], ["h"]), onnx.helper.make_node("Relu", ["h"], ["y"])],
                      [("x", onnx.TensorProto.FLOAT, [2, 16])], [("y", onnx.TensorProto.FLOAT, [2, 8])], [w])


def test_an_artifact_needing_features_this_cpu_lacks_is_refused_by_name(tmp_path, monkeypatch):
    """As on a machine without AVX2 (an artifact folder copied there, a cache on a network
    folder): the session refuses it, naming what is missing, before the library is loaded."""
    folder = str(tmp_path / "artifact")
    onnxc.compile_model(small_model(), folder, onnxc.CompileOptions(march="x86-64-v3"))
    onnxc.InferenceSession(folder)   # fine here
    monkeypatch.setattr(cpu, "host_features", lambda: frozenset({"sse2", "pni", "ssse3", "sse4_1", "sse4_2"}))
    with pytest.raises(onnxc.ModelError, match=r"lacks \(.*avx2.*fma.*\).*--march x86-64-v3"):
        onnxc.InferenceSession(folder)


def test_the_cache_key_holds_the_features_native_resolves_to(monkeypatch):
    """Two machines sharing a cache never load each other's -march=native builds: the key holds
    the features the compiler enables here, not the word "native"."""
    native = tc.Toolchain(march="native")
    here = native.identity()
    real = tc.target_macros
    # the other machine has an extension this one lacks (AVX-512 on an AVX2 machine, AMX on an
    # AVX-512 one), or, where this one has every extension listed, lacks one (the last, AMX's)
    mine = real(native.cc, tuple(native.flags()))
    lacking = next((m for m in tc.X86_FEATURE_MACROS if m not in mine), None)
    if lacking is not None:
        monkeypatch.setattr(tc, "target_macros", lambda cc, flags: real(cc, flags) | {lacking})
    else:
        lacking = list(tc.X86_FEATURE_MACROS)[-1]
        monkeypatch.setattr(tc, "target_macros", lambda cc, flags: real(cc, flags) - {lacking})
    elsewhere = tc.Toolchain(march="native").identity()
    flag = tc.X86_FEATURE_MACROS[lacking]
    assert here != elsewhere and (flag in elsewhere) != (flag in here)
