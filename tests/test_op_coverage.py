"""Every operator version of ai.onnx and ai.onnx.ml in the installed onnx's schema history is
compiled by onnxc (what ``onnxc ops`` lists), except the versions listed below with a reason.

A version missing from ``onnxc ops`` and from the list fails the test; so does a listed version
that ``onnxc ops`` covers now (remove it from the list), so the list only shrinks.
"""
from __future__ import annotations

import warnings

import onnx

from onnxc.compiler.ops.registry import supported_ops

DOMAINS = {"": "ai.onnx", "ai.onnx": "ai.onnx", "ai.onnx.ml": "ai.onnx.ml"}

NOT_YET_SUPPORTED: dict[tuple[str, str, int], str] = {}


def schema_versions() -> set[tuple[str, str, int]]:
    return {(DOMAINS[s.domain], s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history()
            if s.domain in DOMAINS}


def covered_by_onnxc(versions: set[tuple[str, str, int]]) -> set[tuple[str, str, int]]:
    ranges = [(DOMAINS.get(d, d), op, since, until) for d, op, since, until in supported_ops()]
    return {(d, op, v) for d, op, v in versions
            if any(d == rd and op == rop and since <= v <= until for rd, rop, since, until in ranges)}


def test_every_operator_version_is_covered_or_listed():
    versions = schema_versions()
    covered = covered_by_onnxc(versions)
    missing = versions - covered
    report = f"onnxc ops covers {len(covered)} of {len(versions)} ai.onnx / ai.onnx.ml operator versions"
    warnings.warn(report, stacklevel=1)
    unlisted = sorted(missing - set(NOT_YET_SUPPORTED))
    assert not unlisted, f"{report}; not covered and not in NOT_YET_SUPPORTED: {unlisted}"
    now_covered = sorted(set(NOT_YET_SUPPORTED) & covered)
    assert not now_covered, f"{report}; covered now, remove from NOT_YET_SUPPORTED: {now_covered}"
    unknown = sorted(set(NOT_YET_SUPPORTED) - versions)
    assert not unknown, f"NOT_YET_SUPPORTED lists versions the onnx schema history does not have: {unknown}"
