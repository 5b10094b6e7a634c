"""Which conformance cases the CUDA build refuses, or rewrite expected_cuda_refusals.txt.

    python tests/conformance/cuda_refusals.py            # print the refused cases and why
    python tests/conformance/cuda_refusals.py --write    # rewrite the list from this run

Only the compiler runs (no nvcc): the CUDA build refuses a model while its source is
generated. Every case is listed when refused, including cases that fail natively
(expected_failures.txt): whether the CUDA build takes a model does not depend on them.
"""
from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance import refusal_lists  # noqa: E402
from conformance.cases import all_cases  # noqa: E402
from conformance.cuda import CUDA_REFUSALS, cuda_refusal  # noqa: E402


def refusal(name: str) -> tuple[str, str | None]:
    warnings.simplefilter("ignore")
    return name, cuda_refusal(all_cases()[name])


HEADER = ("# ONNX node conformance cases that the CUDA build refuses (a session then runs them on the\n"
          "# CPU), one per line: `name: reason`. A case refused but not listed fails the CUDA suites,\n"
          "# and so does a listed case that builds (remove it). Regenerate with\n"
          "# `python tests/conformance/cuda_refusals.py --write`.\n")


if __name__ == "__main__":
    raise SystemExit(refusal_lists.main(
        refusal, CUDA_REFUSALS, HEADER,
        lambda taken, refused: f"the CUDA build takes {taken} of {taken + refused} cases and refuses {refused}"))
