"""``main(argv)``: the benchmark suite's command line (``python -m onnxc.benchmarks``, and
``onnxc bench`` without a model)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence

from . import gemm, harness, models, report, suite, targets

DEFAULT_JSON = os.path.join("build", "benchmarks.json")
EPILOG = """examples:
  python -m onnxc.benchmarks                      the whole suite (takes a while)
  python -m onnxc.benchmarks --smoke              quick models, few runs, 1 thread (what CI runs)
  python -m onnxc.benchmarks --models mlp,light_resnet50 --threads 1
  python -m onnxc.benchmarks --list               the models
  onnxc bench --corpus --threads 1,2              the real-world corpus (benchmarks/README.md)
  onnxc bench --corpus --models magika,gpt2_ts --threads 1 --min-seconds 0.3
  onnxc bench --corpus --prepare                  download and export the corpus only
exit status: 0, also when targets are missed (they are reported); 1 with --check-targets and a missed target"""


def _int_list(text: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, not {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("thread counts must be >= 1")
    return values


def parser(prog: str = "python -m onnxc.benchmarks") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Time onnxc against onnxruntime on a model suite and a GEMM "
                                            "microbenchmark.")
    p.add_argument("--smoke", action="store_true",
                   help="quick models only, few runs, 1 thread, no memory probes, small GEMMs")
    p.add_argument("--models", help="comma-separated model names (see --list); default: all (--smoke: the quick ones)")
    p.add_argument("--threads", type=_int_list,
                   help="comma-separated thread counts; default 1,2 and the usable core count (--smoke: 1)")
    p.add_argument("--json", metavar="PATH",
                   help=f"results file (default {DEFAULT_JSON}; with --corpus build/corpus.json)")
    p.add_argument("--runs", type=int, metavar="N", help="at least N timed runs per runtime")
    p.add_argument("--min-seconds", type=float, metavar="S", help="at least S seconds of timed runs per runtime")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed runs of each runtime first")
    p.add_argument("--block", type=int, metavar="N", help="timed runs per turn, at least (default 3)")
    p.add_argument("--settle-ms", type=float, metavar="MS",
                   help="pause before each turn, then one untimed run (default 200; 0: neither)")
    p.add_argument("--turn-ms", type=float, metavar="MS",
                   help="timed runs of a turn last at least MS milliseconds (default 300; "
                        "--block 1 --settle-ms 0 --turn-ms 0: strict A B A B)")
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help="RSS probes in child processes (default: on; off with --smoke)")
    p.add_argument("--gemm", action=argparse.BooleanOptionalAction, default=True,
                   help="the GEMM microbenchmark (default: on; small shapes with --smoke)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="onnxc's GEMMs and convolutions in bf16 (session.onnxc.precision; CPUs with "
                        "AVX512-BF16) against onnxruntime's float32: the tables add each model's accuracy "
                        "(largest absolute and relative difference); no memory probes (default fp32)")
    p.add_argument("--check-targets", action="store_true", help="exit 1 if any target is missed")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    corpus = p.add_argument_group("the real-world corpus (--corpus)")
    corpus.add_argument("--corpus", action="store_true",
                        help="run the corpus of third-party and exported models instead of the suite "
                             "(files in $ONNXC_CORPUS_DIR, default ~/.cache/onnxc/corpus; exports need "
                             "the bench extra: torch, torchvision, transformers)")
    corpus.add_argument("--prepare", action="store_true", help="download, export and quantize only; time nothing")
    corpus.add_argument("--rebuild", action="store_true", help="download, export and quantize again")
    corpus.add_argument("--modes", action=argparse.BooleanOptionalAction, default=True,
                        help="also time back to back, after 30 ms idle and beside an onnxruntime session (default: on)")
    corpus.add_argument("--openvino", action=argparse.BooleanOptionalAction, default=True,
                        help="the OpenVINO column when openvino is installed (default: on)")
    corpus.add_argument("--tokens", type=int, default=32, metavar="N",
                        help="tokens per timed generation of a decoder with its KV cache (default 32)")
    corpus.add_argument("--readme", metavar="PATH",
                        help="README whose results section gets the tables (default: benchmarks/README.md "
                             "of a source checkout, when there is one; --readme '' writes none)")
    return p


def _timing(args: argparse.Namespace) -> harness.TimingConfig:
    base = harness.SMOKE if args.smoke else harness.FULL
    chosen = {"min_runs": args.runs, "min_seconds": args.min_seconds, "warmup": args.warmup, "block": args.block,
              "settle_ms": args.settle_ms, "turn_ms": args.turn_ms}
    for name, value in chosen.items():
        if value is not None and value < 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 0")
    return dataclasses.replace(base, **{k: v for k, v in chosen.items() if v is not None})


def _default_threads(smoke: bool) -> list[int]:
    from onnxc.runtime.options import usable_cores
    return [1] if smoke else sorted({1, 2, usable_cores()})


def config_from(args: argparse.Namespace) -> suite.SuiteConfig:
    shapes = (gemm.SMOKE_SHAPES if args.smoke else gemm.SHAPES) if args.gemm else []
    # (the memory probes' child processes make float32 sessions)
    memory = args.precision == "fp32" and (args.memory if args.memory is not None else not args.smoke)
    return suite.SuiteConfig(threads=args.threads or _default_threads(args.smoke), timing=_timing(args),
                             memory=memory, gemm_shapes=list(shapes), smoke=args.smoke, precision=args.precision)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _list_models() -> None:
    for m in models.MODELS:
        note = f"quick: smoke mode, target <= {targets.QUICK_LIMIT}" if m.quick else f"target <= {targets.MODEL_LIMIT}"
        print(f"{m.name:22} {note}")


def main(argv: Sequence[str] | None = None, prog: str = "python -m onnxc.benchmarks") -> int:
    """Runs the suite; ``prog`` names the command in help and in the JSON (``onnxc bench`` passes its own)."""
    args = parser(prog).parse_args(argv)
    if args.corpus and args.precision != "fp32":
        print("error: --precision applies to the suite, not to --corpus", file=sys.stderr)
        return 2
    if args.corpus:
        from .corpus.cli import main as corpus_main
        return corpus_main(args, _timing(args), prog, argv)
    if args.list:
        _list_models()
        return 0
    names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else None
    try:
        selected = models.select(names, quick_only=args.smoke)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    config = config_from(args)
    start = time.perf_counter()
    results = suite.run_suite(selected, config, _log)
    results["wall_s"] = time.perf_counter() - start
    results["command"] = " ".join([prog, *(argv if argv is not None else sys.argv[1:])])
    report.print_report(results)
    path = args.json or DEFAULT_JSON
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(f"\nresults written to {path} ({results['wall_s']:.0f} s)")
    missed = [t for t in results["targets"] if t["met"] is False]
    return 1 if args.check_targets and missed else 0
