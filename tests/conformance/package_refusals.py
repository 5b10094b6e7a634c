"""Which conformance cases ``--target c`` refuses, or rewrite expected_package_refusals.txt.

    python tests/conformance/package_refusals.py            # print the refused cases and why
    python tests/conformance/package_refusals.py --write    # rewrite the list from this run

Only the compiler runs (no C compiler): a package is refused while it is generated. Every case
is listed when refused, including cases that fail natively under some package versions
(expected_failures.txt): whether a package can hold a model does not depend on them.
"""
from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance import refusal_lists  # noqa: E402
from conformance.cases import all_cases  # noqa: E402
from conformance.embedded import PACKAGE_REFUSALS  # noqa: E402


def refusal(name: str) -> tuple[str, str | None]:
    """The case's name and why a package cannot hold it (None: it can)."""
    from onnxc.compiler.errors import UnsupportedError
    from onnxc.driver import CompileOptions, generate_source
    warnings.simplefilter("ignore")
    try:
        generate_source(all_cases()[name].model, CompileOptions(target="c", prefix="case"), command="onnxc")
    except UnsupportedError as e:
        return name, " ".join(str(e).split())[:240]
    return name, None


HEADER = ("# ONNX node conformance cases that `--target c` refuses, one per line: `name: reason`.\n"
          "# A case refused but not listed fails the package suite, and so does a listed case that\n"
          "# builds (remove it). Regenerate with `python tests/conformance/package_refusals.py --write`.\n")


if __name__ == "__main__":
    raise SystemExit(refusal_lists.main(
        refusal, PACKAGE_REFUSALS, HEADER,
        lambda taken, refused: f"{taken} of {taken + refused} cases build as packages, {refused} are refused"))
