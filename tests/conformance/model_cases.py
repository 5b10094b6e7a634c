"""The model test suite of the installed onnx package (``onnx/backend/test/data``), run through onnxc.

Each folder holds ``model.onnx`` and ``test_data_set_*/input_*.pb, output_*.pb``. A folder
loads into the shape of a node case (``name``, ``model``, ``data_sets``, ``rtol``, ``atol``),
so :func:`conformance.cases.run_case` compiles, runs and compares it like one.
"""
from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import numpy_helper

from conformance.cases import read_expected_failures

KINDS = ("simple", "pytorch-converted", "pytorch-operator")
EXPECTED_MODEL_FAILURES = os.path.join(os.path.dirname(__file__), "expected_model_failures.txt")


@dataclass
class ModelCase:
    name: str
    model_dir: str
    rtol: float
    atol: float

    @functools.cached_property
    def model(self) -> onnx.ModelProto:
        return onnx.load(os.path.join(self.model_dir, "model.onnx"))

    @functools.cached_property
    def data_sets(self) -> list[tuple[list[Any], list[Any]]]:
        graph = self.model.graph
        initializers = {i.name for i in graph.initializer}
        inputs = [i for i in graph.input if i.name not in initializers]
        sets = []
        for folder in sorted(glob.glob(os.path.join(self.model_dir, "test_data_set_*"))):
            feeds = [_load(os.path.join(folder, f"input_{i}.pb"), v.type) for i, v in enumerate(inputs)
                     if os.path.exists(os.path.join(folder, f"input_{i}.pb"))]
            expected = [_load(os.path.join(folder, f"output_{i}.pb"), v.type) for i, v in enumerate(graph.output)]
            sets.append((feeds, expected))
        return sets


def _load(path: str, type_proto: onnx.TypeProto) -> Any:
    """A .pb of the suite as the value its graph input or output declares (as onnx's runner reads it)."""
    with open(path, "rb") as f:
        content = f.read()
    if type_proto.HasField("sequence_type"):
        return numpy_helper.to_list(onnx.SequenceProto.FromString(content))
    if type_proto.HasField("optional_type"):
        return numpy_helper.to_optional(onnx.OptionalProto.FromString(content))
    return numpy_helper.to_array(onnx.TensorProto.FromString(content))


@functools.lru_cache(maxsize=1)
def all_model_cases() -> dict[str, ModelCase]:
    """Every model folder of the suite, by ``<kind>/<folder name>``."""
    from onnx.backend.test.loader import load_model_tests
    cases = {}
    for kind in KINDS:
        for test in load_model_tests(kind=kind):
            name = f"{kind}/{test.name}"
            cases[name] = ModelCase(name, test.model_dir, test.rtol, test.atol)
    return cases


def expected_model_failures() -> dict[str, str]:
    """case name -> reason, from expected_model_failures.txt."""
    return read_expected_failures(EXPECTED_MODEL_FAILURES)
