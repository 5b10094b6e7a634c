"""The issue's performance targets, checked against a results dict. A target is met,
missed, or not measured (its models, shapes or thread counts were not run)."""
from __future__ import annotations

from typing import Any

GEOMEAN_LIMIT = 0.9     # geometric mean of onnxc/onnxruntime median ratios
MODEL_LIMIT = 1.3       # no model slower than this ratio
QUICK_LIMIT = 0.5       # models under 1 ms in onnxruntime: per-call overhead is what they measure
GEMM_FRACTION = 0.85    # onnxc GFLOP/s over numpy's BLAS GFLOP/s
GEMM_SHAPE = (1024, 1024, 1024)
TARGET_THREADS = (1, 2)  # the thread counts the issue sets targets for; others are reported only


def model_limit(quick: bool) -> float:
    return QUICK_LIMIT if quick else MODEL_LIMIT


def _target(text: str, met: bool | None, value: float | None = None, limit: float | None = None,
            misses: list[str] | None = None) -> dict[str, Any]:
    return {"target": text, "met": met, "value": value, "limit": limit, "misses": misses or []}


def _plural(threads: int) -> str:
    return f"{threads} thread{'s' if threads != 1 else ''}"


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target, in the issue's order, for each thread count it names."""
    targets = []
    for threads in TARGET_THREADS:
        entries = [(name, model["quick"], model["threads"][str(threads)])
                   for name, model in results["models"].items() if str(threads) in model.get("threads", {})]
        targets += _latency_targets(threads, entries, results["geomean"].get(str(threads)))
    targets += _gemm_targets(results.get("gemm", []))
    return targets


def _latency_targets(threads: int, entries: list[tuple[str, bool, dict[str, Any]]],
                     geomean: float | None) -> list[dict[str, Any]]:
    at = _plural(threads)
    if not entries:
        return [_target(f"geometric mean of ratios at {at} <= {GEOMEAN_LIMIT}", None),
                _target(f"no model above {MODEL_LIMIT} at {at}", None),
                _target(f"models under 1 ms in onnxruntime <= {QUICK_LIMIT} at {at}", None)]
    broken = [f"{name}: {entry.get('error') or 'outputs differ from onnxruntime'}" for name, _, entry in entries
              if "error" in entry or not entry.get("outputs_match", False)]
    timed = [(name, quick, entry) for name, quick, entry in entries if "ratio" in entry]
    slow = [f"{name} {entry['ratio']:.2f}" for name, _, entry in timed if entry["ratio"] > MODEL_LIMIT]
    quick_entries = [(name, entry) for name, quick, entry in timed if quick]
    slow_quick = [f"{name} {entry['ratio']:.2f}" for name, entry in quick_entries if entry["ratio"] > QUICK_LIMIT]
    return [
        _target(f"every model runs in both runtimes with matching outputs at {at}", not broken, misses=broken),
        _target(f"geometric mean of ratios at {at} <= {GEOMEAN_LIMIT}",
                None if geomean is None else geomean <= GEOMEAN_LIMIT, geomean, GEOMEAN_LIMIT),
        _target(f"no model above {MODEL_LIMIT} at {at}", not slow if timed else None,
                max((e["ratio"] for _, _, e in timed), default=None), MODEL_LIMIT, slow),
        _target(f"models under 1 ms in onnxruntime <= {QUICK_LIMIT} at {at}",
                not slow_quick if quick_entries else None,
                max((e["ratio"] for _, e in quick_entries), default=None), QUICK_LIMIT, slow_quick),
    ]


def _gemm_targets(gemm: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """1024^3 fp32 at 1 thread, for each way of passing B (a weight may be pre-packed, an input not)."""
    targets = []
    m, k, n = GEMM_SHAPE
    for b_kind in ("weight", "input"):
        text = f"GEMM {m}x{k}x{n} fp32 (B {b_kind}) at 1 thread >= {GEMM_FRACTION:.0%} of numpy BLAS GFLOP/s"
        entry = next((e for e in gemm if (e["m"], e["k"], e["n"]) == GEMM_SHAPE and e["b"] == b_kind
                      and e["threads"] == 1), {})
        if "onnxc_over_numpy" in entry:
            fraction = entry["onnxc_over_numpy"]
            targets.append(_target(text, fraction >= GEMM_FRACTION, fraction, GEMM_FRACTION))
        elif "error" in entry:  # onnxc (or onnxruntime) failed on it
            targets.append(_target(text, False, limit=GEMM_FRACTION, misses=[entry["error"]]))
        else:  # not run, or numpy's side failed
            targets.append(_target(text, None, limit=GEMM_FRACTION))
    return targets
