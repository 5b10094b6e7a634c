"""Process memory of one runtime's session, measured in a child process of its own so the
two runtimes' allocations (and the harness's) never mix.

The child imports the runtime and loads the feed first, takes its resident set size
(VmRSS) as the baseline, resets the peak (VmHWM) where Linux allows it, then creates
the session and runs it once. It reports the resident growth and the peak growth over
the baseline. onnxc loads the artifact the parent already compiled (same cache folder
and options), so compiling is not counted; a probe that finds no artifact (the cache key
covers onnxc's own sources, so editing them during a run changes it) compiles in the
child, and then reports an error rather than the compiler's memory as the session's.

Run as a module only by ``measure``: ``python -m <package>.memory RUNTIME MODEL FEED THREADS``.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from .children import run_module
from .sessions import SESSION_MAKERS


def measure(runtime: str, model_path: str, feed_path: str, threads: int) -> dict[str, Any]:
    """Memory growth of ``runtime`` creating a session for the model and running it once."""
    return run_module("memory", [runtime, model_path, feed_path, str(threads)])


def _status_bytes(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux 4.0+; some sandboxes refuse)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cache_entries() -> set[str]:
    """Names in onnxc's compile cache folder: a new one after session creation means a compile."""
    import os

    from onnxc.runtime.cache import cache_root
    folder = cache_root()
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def _probe(runtime: str, model_path: str, feed_path: str, threads: int) -> dict[str, Any]:
    import gc

    import numpy as np
    if runtime == "onnxc":
        import onnxc  # noqa: F401 - imported before the baseline: its import is not the session's memory
    else:
        import onnxruntime  # noqa: F401
    with np.load(feed_path) as data:
        feed = {name: data[name] for name in data.files}
    cached = _cache_entries() if runtime == "onnxc" else set()
    gc.collect()
    baseline = _status_bytes("VmRSS")
    peak_reset = _reset_peak()
    session = SESSION_MAKERS[runtime](model_path, threads)
    session.run(None, feed)
    if runtime == "onnxc" and _cache_entries() - cached:
        return {"error": "the child compiled the model (no cached artifact: were onnxc's sources edited during the run?)"}
    return {"baseline_rss_bytes": baseline, "rss_delta_bytes": _status_bytes("VmRSS") - baseline,
            "peak_rss_delta_bytes": max(_status_bytes("VmHWM") - baseline, 0), "peak_reset": peak_reset}


if __name__ == "__main__":
    runtime_name, model, feed_file, thread_count = sys.argv[1:5]
    if runtime_name not in SESSION_MAKERS:
        raise SystemExit(f"runtime must be one of {', '.join(SESSION_MAKERS)}")
    print(json.dumps(_probe(runtime_name, model, feed_file, int(thread_count))))
