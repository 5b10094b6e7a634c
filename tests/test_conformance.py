"""ONNX node conformance: every case of the installed onnx package, compiled and run.

A case listed in conformance/expected_failures.txt must fail (with its reason);
a listed case that passes fails this suite, so the list only shrinks.
"""
from __future__ import annotations

import pytest

from conformance.cases import all_cases, expected_failures, run_listed_case
from tools import require_libraries_of

CASES = sorted(all_cases())
EXPECTED = expected_failures()


def test_expected_failures_name_real_cases():
    unknown = sorted(set(EXPECTED) - set(CASES))
    assert not unknown, f"expected_failures.txt lists cases the onnx package does not have: {unknown[:10]}"


@pytest.mark.conformance
@pytest.mark.parametrize("name", CASES)
def test_node_case(name, tmp_path):
    require_libraries_of(all_cases()[name].model)
    run_listed_case(name, all_cases()[name], str(tmp_path / "artifact"), EXPECTED.get(name), "expected_failures.txt")
