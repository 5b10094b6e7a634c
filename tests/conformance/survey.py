"""Run every conformance case and report, or rewrite expected_failures.txt.

    python tests/conformance/survey.py                # print pass count and failure reasons
    python tests/conformance/survey.py --write        # rewrite expected_failures.txt from this run
    python tests/conformance/survey.py -k softmax     # only cases whose name contains 'softmax'
    python tests/conformance/survey.py --onnxruntime  # the same cases on onnxruntime, for comparison

Reasons written by --write come from the failure itself (the unsupported op, type
or feature); review numeric mismatches by hand before committing.
"""
from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import re
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance.cases import (EXPECTED_FAILURES, all_cases, expected_failures, run_case,  # noqa: E402
                               run_case_onnxruntime)


def _reason(err: BaseException) -> str:
    """A one-line reason: mechanical for missing operators, types and containers; a
    numeric mismatch keeps its message and needs a human explanation."""
    text = " ".join(str(err).split())
    if "does not support:" in text:
        ops = text.split("does not support:", 1)[1].strip()
        return f"operator {ops.split(': nodes')[0].strip()} is not supported yet"
    m = re.search(r"element type (\w+) is not supported", text)
    if m:
        return f"element type {m.group(1)} is not supported yet"
    if "only tensor inputs and outputs" in text:
        return "optional and sequence values are not supported yet (tensor inputs and outputs only)"
    return f"{type(err).__name__}: {text[:220]}"


def _mechanical(reason: str) -> bool:
    return reason.startswith(("operator ", "element type ", "optional and sequence values")) or ": " in reason[:40] \
        and reason.split(":", 1)[0].endswith(("Error", "Failure", "Mismatch"))


def _run(name: str, onnxruntime: bool = False) -> tuple[str, str | None]:
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if onnxruntime:
                run_case_onnxruntime(all_cases()[name])
            else:
                run_case(all_cases()[name], os.path.join(tmp, "artifact"))
            return name, None
        except Exception as e:  # noqa: BLE001 - every failure is reported
            return name, _reason(e)


def _conditional_lines() -> dict[str, str]:
    """name -> line, for the entries listed under a package version condition."""
    out = {}
    with open(EXPECTED_FAILURES, encoding="utf-8") as f:
        for line in f:
            head = line.partition(":")[0]
            if not line.startswith("#") and "[" in head:
                out[head.partition("[")[0].strip()] = line if line.endswith("\n") else line + "\n"
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("-k", default="")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--onnxruntime", action="store_true", help="run the cases on onnxruntime instead")
    args = parser.parse_args()
    if args.write and args.onnxruntime:
        parser.error("--write records onnxc's failures; leave out --onnxruntime")
    os.environ.setdefault("ONNXC_CACHE_DIR", tempfile.mkdtemp(prefix="onnxc-survey-"))
    names = sorted(n for n in all_cases() if args.k in n)
    with multiprocessing.Pool(args.j) as pool:
        results = dict(pool.imap_unordered(functools.partial(_run, onnxruntime=args.onnxruntime), names,
                                           chunksize=4))
    failures = {n: r for n, r in sorted(results.items()) if r is not None}
    passed = len(names) - len(failures)
    for n, r in failures.items():
        print(f"{n}: {r}")
    print(f"{passed} of {len(names)} cases pass ({100.0 * passed / max(len(names), 1):.1f}%)")
    if args.write:
        old = expected_failures()
        conditional = _conditional_lines()   # kept as written: their condition is the point
        keep = {n: r for n, r in old.items() if n not in results}
        keep.update(failures)
        for n in failures:  # a reason written by hand stays while the case still fails
            if n in old and not _mechanical(old[n]):
                keep[n] = old[n]
        keep.update({n: None for n in conditional if n not in old or n in failures})
        with open(EXPECTED_FAILURES, "w", encoding="utf-8") as f:
            f.write("# ONNX node conformance cases onnxc does not pass yet, one per line: `name: reason`.\n"
                    "# A listed case that passes fails the suite: remove it. Regenerate with\n"
                    "# `python tests/conformance/survey.py --write` and review the reasons.\n"
                    "# `name [package>=version]: reason` lists a case only where the installed package meets "
                    "the condition.\n")
            for n in sorted(keep):
                f.write(conditional[n] if n in conditional else f"{n}: {keep[n]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
