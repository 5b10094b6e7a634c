"""The command line both refusal lists share (package_refusals.py, cuda_refusals.py): ask
every conformance case whether a build refuses it, print the refused cases with their
reasons, and with ``--write`` rewrite the pinned list."""
from __future__ import annotations

import argparse
import multiprocessing
import os
from collections.abc import Callable

from conformance.cases import all_cases


def main(refusal: Callable[[str], tuple[str, str | None]], path: str, header: str,
         summary: Callable[[int, int], str]) -> int:
    """``refusal(name)`` gives (name, reason or None); ``header`` opens the written list;
    ``summary(taken, refused)`` is the last line printed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="rewrite the pinned list from this run")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1, help="processes (default: every core)")
    args = parser.parse_args()
    names = sorted(all_cases())
    with multiprocessing.Pool(args.j) as pool:
        refused = {n: r for n, r in pool.imap_unordered(refusal, names, chunksize=8) if r is not None}
    for n in sorted(refused):
        print(f"{n}: {refused[n]}")
    print(summary(len(names) - len(refused), len(refused)))
    if args.write:
        with open(path, "w", encoding="utf-8") as f:
            f.write(header)
            for n in sorted(refused):
                f.write(f"{n}: {refused[n]}\n")
    return 0
