"""onnx's own model test suite: every model folder of the installed onnx package (simple,
pytorch-converted, pytorch-operator), compiled, run on its test data sets and compared like
a node conformance case.

A case listed in conformance/expected_model_failures.txt must fail (with its reason); a
listed case that passes fails this suite, so the list only shrinks.
"""
from __future__ import annotations

import pytest

from conformance.cases import run_listed_case
from conformance.model_cases import all_model_cases, expected_model_failures

CASES = sorted(all_model_cases())
EXPECTED = expected_model_failures()


def test_expected_model_failures_name_real_cases():
    unknown = sorted(set(EXPECTED) - set(CASES))
    assert not unknown, f"expected_model_failures.txt lists cases the onnx package does not have: {unknown}"


def test_every_case_has_test_data():
    empty = [name for name in CASES if not all_model_cases()[name].data_sets]
    assert not empty, f"model folders without test data sets: {empty}"


@pytest.mark.conformance
@pytest.mark.parametrize("name", CASES)
def test_model_case(name, tmp_path):
    run_listed_case(name, all_model_cases()[name], str(tmp_path / "artifact"), EXPECTED.get(name),
                    "expected_model_failures.txt")
