"""Prints a results dict as tables: one per thread count, the GEMM table, and the targets."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

MB = 1 << 20
Print = Callable[[str], None]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned text columns, two spaces apart."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header] + rows]


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _memory_cell(entry: dict[str, Any]) -> str:
    """Peak RSS growth of onnxc / onnxruntime in MB ("-" when not measured)."""
    mem = entry.get("memory")
    if not mem:
        return "-"
    cells = [f"{m['peak_rss_delta_bytes'] / MB:.1f}" if "peak_rss_delta_bytes" in m else "error"
             for m in (mem["onnxc"], mem["onnxruntime"])]
    return "/".join(cells)


def _accuracy_cell(model: dict[str, Any], entry: dict[str, Any]) -> str:
    """Largest absolute / relative difference from onnxruntime's float32 outputs, and of the
    logits where the outputs are a Softmax's."""
    cell = f"{entry['max_abs_diff']:.2g} / {entry['max_rel_diff']:.2g}"
    logits = model.get("logits", {})
    if "max_abs_diff" in logits:
        cell += f" (logits {logits['max_abs_diff']:.2g} / {logits['max_rel_diff']:.2g})"
    return cell


def _model_row(name: str, model: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    if "error" in entry:
        return [name, "error: " + entry["error"][:80], "", "", "", "", "", ""]
    limit = model["target_ratio"]
    verdict = "ok" if entry["ratio"] <= limit else "MISS"
    if not entry["outputs_match"]:
        verdict += " (outputs differ)"
    elif entry.get("reference", "onnxruntime") != "onnxruntime":
        verdict += " (outputs: graph as written)"
    return [name, f"{entry['onnxruntime']['median_ms']:.3f}", f"{entry['onnxc']['median_ms']:.3f}",
            f"{entry['ratio']:.2f}", f"<= {limit} {verdict}", f"{entry['arena_bytes'] / MB:.1f}", _memory_cell(entry),
            f"{entry['onnxc_compile_s']:.1f}"]


def latency_tables(results: dict[str, Any]) -> list[str]:
    lines = []
    header = ["model", "onnxruntime ms", "onnxc ms", "ratio", "target", "arena MB", "peak RSS onnxc/ort MB",
              "compile s"]
    precision = results["config"].get("precision", "fp32")
    reduced = precision != "fp32"
    if reduced:
        header.append("max abs / rel diff")
    for threads in results["config"]["threads"]:
        rows = []
        for name, model in results["models"].items():
            if "error" in model and not model["threads"]:
                rows.append([name, "error: " + model["error"][:80], "", "", "", "", "", ""] + [""] * reduced)
            elif str(threads) in model["threads"]:
                entry = model["threads"][str(threads)]
                rows.append(_model_row(name, model, entry)
                            + ([_accuracy_cell(model, entry) if "error" not in entry else ""] if reduced else []))
        lines += ["", f"threads = {threads} (median of interleaved runs; ratio = onnxc / onnxruntime)"
                  + (f"; onnxc in {precision}, onnxruntime in fp32" if reduced else "")]
        lines += table(header, rows)
        geomean = results["geomean"].get(str(threads))
        lines.append(f"geometric mean of ratios: {_number(geomean, 3)}")
    return lines


def gemm_table(results: dict[str, Any]) -> list[str]:
    entries = results.get("gemm") or []
    if not entries:
        return []
    rows = []
    for e in entries:
        shape = f"{e['m']}x{e['k']}x{e['n']}"
        if "error" in e:
            rows.append([shape, e["b"], str(e["threads"]), "error: " + e["error"][:80], "", "", ""])
            continue
        rows.append([shape, e["b"], str(e["threads"]), f"{e['onnxc_gflops']:.1f}", f"{e['onnxruntime_gflops']:.1f}",
                     _number(e.get("numpy_gflops"), 1), _number(e.get("onnxc_over_numpy"), 2)])
    header = ["M x K x N", "B", "threads", "onnxc GFLOP/s", "onnxruntime GFLOP/s", "numpy GFLOP/s", "onnxc/numpy"]
    precision = results["config"].get("precision", "fp32")
    title = "GEMM (MatMul, fp32)" if precision == "fp32" else f"GEMM (MatMul; onnxc in {precision}, the others fp32)"
    return ["", title] + table(header, rows)


def targets_summary(results: dict[str, Any]) -> list[str]:
    checks = results.get("targets", [])
    missed = [t for t in checks if t["met"] is False]
    unmeasured = [t for t in checks if t["met"] is None]
    met = sum(1 for t in checks if t["met"])
    lines = ["", f"targets: {met} met, {len(missed)} missed, {len(unmeasured)} not measured"]
    for t in missed:
        value = f" (got {t['value']:.2f})" if t["value"] is not None else ""
        details = f": {'; '.join(t['misses'])}" if t["misses"] else ""
        lines.append(f"  MISSED {t['target']}{value}{details}")
    if unmeasured:
        lines.append("  not measured: " + "; ".join(t["target"] for t in unmeasured))
    if results["config"].get("smoke"):
        lines.append("  (smoke mode: few runs of the quick models only; the numbers are not the suite's)")
    return lines


def print_report(results: dict[str, Any], out: Print = print) -> None:
    machine = results["machine"]
    out(f"{machine['cpu']}, {machine['usable_cores']} usable cores; onnxc {machine['onnxc']}, onnxruntime "
        f"{machine['onnxruntime']}, numpy {machine['numpy']}; {machine['date']}")
    load = machine.get("load_average_start")
    if load and load[0] >= 1.0:
        out(f"note: the machine was busy when the run started (load average {load[0]:.2f}); timings, "
            "above all threaded ones, may be skewed")
    for line in latency_tables(results) + gemm_table(results) + targets_summary(results):
        out(line)
