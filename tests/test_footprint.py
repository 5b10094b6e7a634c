"""The footprint benchmark's TensorFlow Lite Micro column (benchmarks/tflm.py,
benchmarks/tflite_export.py): the footprint models as .tflite flatbuffers compute what onnxruntime
computes under TFLM's interpreter, and a wrong translation is caught.

``tflite-micro`` is a benchmark dependency (``onnxc[bench]``), not a test one: where it is
installed these tests run TFLM; where it is not they check that the benchmark says what is
missing instead of failing."""
from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

from test_benchmarks import PACKAGE

footprint = importlib.import_module(f"{PACKAGE}.footprint")
tflm = importlib.import_module(f"{PACKAGE}.tflm")
HAS_TFLM = importlib.util.find_spec("tflite_micro") is not None


@pytest.mark.parametrize("name", list(footprint.MODELS))
def test_tflm_runs_each_footprint_model_as_onnxruntime_does(name):
    model = footprint.MODELS[name]()
    row = footprint.tflm_row(model)
    if not HAS_TFLM:
        assert list(row) == ["tflm"] and row["tflm"].endswith("(pip install onnxc[bench])")
        return
    assert row["tflm_matches_onnxruntime"] is True
    assert row["tflm_arena_bytes"] == row["tflm_arena_head_bytes"] + row["tflm_arena_tail_bytes"]
    # the arena holds the inputs and outputs, the flatbuffer every weight
    assert row["tflm_arena_head_bytes"] >= footprint.io_bytes(model)
    weights = sum(np.prod(t.dims, dtype=np.int64) for t in model.graph.initializer if len(t.dims) >= 2)
    assert row["tflm_model_bytes"] > weights


def test_a_flatten_that_forgets_the_nhwc_order_does_not_match(monkeypatch):
    if not HAS_TFLM:
        with pytest.raises(ModuleNotFoundError):
            tflm.measure(footprint.MODELS["tiny CNN (3x32x32, 3 conv)"]())
        return
    export = importlib.import_module(f"{PACKAGE}.tflite_export")
    flatten = export.Translator.op_Flatten

    def nchw_order_lost(self, node):
        flatten(self, node)
        self.values[node.output[0]].order = None
    monkeypatch.setattr(export.Translator, "op_Flatten", nchw_order_lost)
    assert tflm.measure(footprint.MODELS["tiny CNN (3x32x32, 3 conv)"]())["tflm_matches_onnxruntime"] is False


def test_an_operator_without_a_translation_is_named():
    if not HAS_TFLM:   # the translator writes with tflite-micro's schema module
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"{PACKAGE}.tflite_export")
        return
    export = importlib.import_module(f"{PACKAGE}.tflite_export")
    lstm = importlib.import_module(f"{PACKAGE}.models").small_lstm()
    with pytest.raises(NotImplementedError, match="LSTM has no TFLite translation"):
        export.to_tflite(lstm)


def test_a_folder_without_tflm_and_its_downloads_is_refused_with_what_is_missing(tmp_path):
    firmware = importlib.import_module(f"{PACKAGE}.tflm_firmware")
    (tmp_path / firmware.DOWNLOADS / "gemmlowp").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"missing: flatbuffers/include, ruy"):
        firmware.includes(str(tmp_path))


def test_tflm_code_counts_text_and_read_only_data_of_tflm_objects_only(tmp_path):
    firmware = importlib.import_module(f"{PACKAGE}.tflm_firmware")
    conv, startup = str(tmp_path / "conv.o"), str(tmp_path / "startup.o")
    (tmp_path / "fw.map").write_text(
        "Discarded input sections\n\n"
        f" .text._ZN6tflite8Register_PADEv\n                0x00000000       0x30 {conv}\n\n"
        "Linker script and memory map\n\n"
        ".text           0x00000000     0x9000\n"
        f" .text._ZN6tflite4ConvEv\n                0x00000400      0x1a4 {conv}\n"
        f" .text.reset_handler\n                0x00000800       0x40 {startup}\n"
        f" .rodata._ZN6tflite5tableE\n                0x00001000       0x20 {conv}\n"
        f" .data.counter   0x20000000        0x4 {conv}\n"
        f" .text.small     0x00001100        0x8 {conv}\n")
    assert firmware.code_bytes(str(tmp_path / "fw.map"), [conv]) == 0x1a4 + 0x20 + 0x8
