"""``onnxc bench --corpus``: the corpus's part of the benchmark command line (the options are
parsed with the suite's, in benchmarks/cli.py)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence

from .. import harness
from . import registry, report
from .run import CorpusConfig, prepare, run_corpus

DEFAULT_JSON = os.path.join("build", "corpus.json")
DEFAULT_THREADS = [1, 2]
# Shorter turns than the suite's: the corpus has many models, each timed also in three more ways.
CORPUS_TIMING = harness.TimingConfig(min_seconds=1.0, settle_ms=200, turn_ms=200)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _readme(args: argparse.Namespace) -> str | None:
    if args.readme is not None:
        return args.readme or None
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    return path if os.path.exists(path) else None


def main(args: argparse.Namespace, timing: harness.TimingConfig, prog: str, argv: Sequence[str] | None) -> int:
    if args.list:
        print("\n".join(report.listing(registry.CORPUS)))
        return 0
    names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else None
    try:
        models = registry.select(names)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    if args.prepare:
        paths = prepare(models, args.rebuild, _log)
        failed = [name for name, path in paths.items() if path.startswith("error: ")]
        print(f"{len(paths) - len(failed)} of {len(paths)} corpus models ready in {registry.cache_dir()}")
        return 1 if failed else 0
    if not args.smoke:   # the suite's full timing defaults, shortened; options given still win
        timing = _corpus_timing(args, timing)
    config = CorpusConfig(threads=args.threads or DEFAULT_THREADS, timing=timing, modes=args.modes,
                          openvino=args.openvino, rebuild=args.rebuild, decoder_steps=max(args.tokens, 2))
    path = args.json or DEFAULT_JSON
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    start = time.perf_counter()
    results = run_corpus(models, config, _log, checkpoint=lambda partial: _write_json(path, partial))
    results["wall_s"] = time.perf_counter() - start
    results["command"] = " ".join([prog, *(argv if argv is not None else sys.argv[1:])])
    report.print_report(results)
    _write_json(path, results)
    readme = _readme(args)
    if readme:
        report.write_readme(readme, results)
    print(f"\nresults written to {path}{f' and {readme}' if readme else ''} ({results['wall_s']:.0f} s)")
    return 0


def _write_json(path: str, results: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=float)


def _corpus_timing(args: argparse.Namespace, timing: harness.TimingConfig) -> harness.TimingConfig:
    given = {"min_seconds": args.min_seconds, "settle_ms": args.settle_ms, "turn_ms": args.turn_ms}
    defaults = {k: getattr(CORPUS_TIMING, k) for k, v in given.items() if v is None}
    return dataclasses.replace(timing, **defaults)
