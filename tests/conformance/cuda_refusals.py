"""Which conformance cases the CUDA build refuses, or rewrite expected_cuda_refusals.txt.

    python tests/conformance/cuda_refusals.py            # print the refused cases and why
    python tests/conformance/cuda_refusals.py --write    # rewrite the list from this run

Only the compiler runs (no nvcc): the CUDA build refuses a model while its source is
generated. Every case is listed when refused, including cases that fail natively
(expected_failures.txt): whether the CUDA build takes a model does not depend on them.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance.cases import all_cases  # noqa: E402
from conformance.cuda import CUDA_REFUSALS, cuda_refusal  # noqa: E402


def refusal(name: str) -> tuple[str, str | None]:
    warnings.simplefilter("ignore")
    return name, cuda_refusal(all_cases()[name])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    names = sorted(all_cases())
    with multiprocessing.Pool(args.j) as pool:
        refused = {n: r for n, r in pool.imap_unordered(refusal, names, chunksize=8) if r is not None}
    for n in sorted(refused):
        print(f"{n}: {refused[n]}")
    print(f"the CUDA build takes {len(names) - len(refused)} of {len(names)} cases and refuses {len(refused)}")
    if args.write:
        with open(CUDA_REFUSALS, "w", encoding="utf-8") as f:
            f.write("# ONNX node conformance cases that the CUDA build refuses (a session then runs them on the\n"
                    "# CPU), one per line: `name: reason`. A case refused but not listed fails the CUDA suites,\n"
                    "# and so does a listed case that builds (remove it). Regenerate with\n"
                    "# `python tests/conformance/cuda_refusals.py --write`.\n")
            for n in sorted(refused):
                f.write(f"{n}: {refused[n]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
