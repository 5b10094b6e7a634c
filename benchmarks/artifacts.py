"""Two artifacts of the same model side by side: the run-time check of a compiler change.

``python -m onnxc.benchmarks.artifacts OLD NEW [--threads 1,2]`` loads two artifact folders
(``onnxc compile model.onnx -o OLD`` with the code before a change, ``-o NEW`` after it, or
one folder each built with different options), runs them interleaved in one process on the
same random inputs (``onnxc run``'s) in the harness's turns and pauses (as the corpus
benchmark times onnxc beside onnxruntime), checks that their outputs agree, and prints the
medians and new / old. Each folder runs at the thread count it was built for unless
``--threads`` names others (a folder built for one thread runs on one)."""
from __future__ import annotations

import argparse
from typing import Any, Optional

from .harness import FULL, TimingConfig, interleaved, outputs_agree, summary_ms


def random_feed(folder: str, seed: int = 0) -> dict[str, Any]:
    """The artifact's inputs as ``onnxc run`` makes them when none are given (symbolic dims 1)."""
    from .._cli_data import build_feed, input_specs
    from ..runtime.loader import read_manifest
    feed, _ = build_feed(input_specs(read_manifest(folder)), {}, {}, seed, [])
    return feed


def compare(old: str, new: str, threads: Optional[int] = None, config: TimingConfig = FULL) -> dict[str, Any]:
    import onnxc
    options = None
    if threads is not None:
        options = onnxc.SessionOptions()
        options.intra_op_num_threads = threads
    a, b = onnxc.InferenceSession(old, options), onnxc.InferenceSession(new, options)
    feed = random_feed(old)
    agree, worst = outputs_agree(b.run(None, feed), a.run(None, feed))
    times_a, times_b = interleaved(lambda: a.run(None, feed), lambda: b.run(None, feed), config)
    old_ms, new_ms = summary_ms(times_a)["median_ms"], summary_ms(times_b)["median_ms"]
    return {"old_ms": old_ms, "new_ms": new_ms, "ratio": new_ms / old_ms, "runs": len(times_a),
            "outputs_agree": agree, "max_abs_diff": worst}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxc.benchmarks.artifacts", description=__doc__.split("\n")[0])
    parser.add_argument("old", help="artifact folder of the code before the change")
    parser.add_argument("new", help="artifact folder of the code after it")
    parser.add_argument("--threads", default=None, help="comma-separated intra-op thread counts (default: as built)")
    args = parser.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")] if args.threads else [None]
    print("| threads | runs | old | new | new / old | outputs agree |")
    print("|---|---|---|---|---|---|")
    for count in counts:
        r = compare(args.old, args.new, count)
        print(f"| {count or 'as built'} | {r['runs']} | {r['old_ms']:.3f} ms | {r['new_ms']:.3f} ms | {r['ratio']:.3f} | "
              f"{'yes' if r['outputs_agree'] else 'NO (max abs diff %.3g)' % r['max_abs_diff']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
