"""The corpus results as text tables, and their section in benchmarks/README.md."""
from __future__ import annotations

import re
from typing import Any

from ..report import table
from .registry import CorpusModel

BEGIN = "<!-- corpus-results:begin (written by onnxc bench --corpus) -->"
END = "<!-- corpus-results:end -->"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _pair(modes: dict[str, Any], way: str) -> str:
    """onnxc ms / onnxruntime ms in one of the thread measurements."""
    cell = modes.get(way) if modes else None
    return f"{_ms(cell['onnxc'])}/{_ms(cell['onnxruntime'])}" if cell else "-"


def _openvino(entry: dict[str, Any]) -> str:
    ov = entry.get("openvino")
    if not ov:
        return "-"
    if "error" in ov:
        return "error"
    mark = "" if ov["outputs_match"] else " (differs)"
    return f"{_ms(ov['median_ms'])} ({ov['median_ms'] / entry['onnxruntime']['median_ms']:.2f}){mark}"


def _row(name: str, entry: dict[str, Any]) -> list[str]:
    if "error" in entry:
        return [name, "error (notes)"] + [""] * 8
    match = "yes" if entry["outputs_match"] else "NO"
    if entry["outputs_match"] and entry.get("reference", "onnxruntime") != "onnxruntime":
        match = "yes (graph as written)"
    return [name, _ms(entry["onnxruntime"]["median_ms"]), _ms(entry["onnxc"]["median_ms"]), f"{entry['ratio']:.2f}",
            f"{entry['max_rel_diff']:.1e} {match}", _pair(entry.get("modes", {}), "back_to_back"),
            _pair(entry.get("modes", {}), "idle_30ms"), _pair(entry.get("modes", {}), "beside"), _openvino(entry),
            f"{entry['onnxc_compile_s']:.1f}"]


HEADER = ["model", "onnxruntime ms", "onnxc ms", "ratio", "max rel diff, match", "back to back onnxc/ort ms",
          "30 ms idle onnxc/ort ms", "beside ort session onnxc/ort ms", "OpenVINO ms (/ort)", "compile s"]


def _notes(name: str, entry: dict[str, Any]) -> list[str]:
    """What the table's cells cannot hold: how outputs differ, why OpenVINO failed."""
    notes = []
    if "error" in entry:
        notes.append(f"{name}: {entry['error']}")
    if entry.get("mismatch"):
        notes.append(f"{name}: outputs differ from onnxruntime's: {entry['mismatch']}")
    ov = entry.get("openvino") or {}
    if "error" in ov:
        notes.append(f"{name}: OpenVINO: {ov['error'][:160]}")
    elif ov.get("mismatch"):
        notes.append(f"{name}: OpenVINO's outputs differ from onnxruntime's: {ov['mismatch']}")
    return notes


def latency_tables(results: dict[str, Any]) -> list[str]:
    lines = []
    for threads in results["config"]["threads"]:
        rows, tokens, notes = [], [], []
        for name, model in results["models"].items():
            entry = model["threads"].get(str(threads))
            if entry is None:
                rows.append([name, "error (notes)"] + [""] * 8)
                notes.append(f"{name}: {model.get('error', 'not run')}")
                continue
            rows.append(_row(name, entry))
            notes += _notes(name, entry)
            token = entry.get("per_token")
            if token and "error" not in token:
                tokens.append([name, _ms(token["onnxruntime_ms"]), _ms(token["onnxc_ms"]),
                               f"{token['onnxc_ms'] / token['onnxruntime_ms']:.2f}",
                               f"{token['last_logits_max_rel_diff']:.1e}"])
            elif token:
                tokens.append([name, "error: " + token["error"][:110], "", "", ""])
        timed = [r for r in rows if r[1] != "error (notes)"]
        matched = [r for r in timed if r[4].endswith("yes")]
        lines += ["", f"threads = {threads} (median ms; ratio = onnxc / onnxruntime in interleaved turns; then, in "
                      "alternating turns, each runtime back to back, after 30 ms idle, right after a run of a "
                      "second onnxruntime session)"]
        lines += table(HEADER, rows)
        geomean = results["geomean"].get(str(threads))
        lines.append(f"{len(timed)} of {len(rows)} models run in both runtimes, {len(matched)} match onnxruntime "
                     f"(rel 1e-4); geometric mean of ratios: {'-' if geomean is None else f'{geomean:.3f}'}")
        if notes:
            lines += ["", "notes:"] + [f"  {note}" for note in notes]
        if tokens:
            lines += ["", f"per generated token, {threads} thread(s), caches bound through IOBinding (median ms)"]
            lines += table(["model", "onnxruntime ms", "onnxc ms", "ratio", "last logits rel diff"], tokens)
    return lines


def machine_lines(results: dict[str, Any]) -> list[str]:
    machine = results["machine"]
    return [f"{machine['cpu']}; SIMD: {' '.join(machine.get('simd', [])) or 'none found'}; "
            f"{machine['usable_cores']} usable cores",
            f"onnxc {machine['onnxc']}, onnxruntime {machine['onnxruntime']}, numpy {machine['numpy']}, "
            f"{machine['toolchain'].split('|')[0]}; {machine['date']}; load average {machine.get('load_average_start')}"]


def print_report(results: dict[str, Any], out: Any = print) -> None:
    for line in machine_lines(results) + latency_tables(results):
        out(line)


def readme_section(results: dict[str, Any]) -> str:
    body = machine_lines(results) + latency_tables(results)
    return "\n".join([BEGIN, "", f"`{results.get('command', 'onnxc bench --corpus')}` "
                      f"({results.get('wall_s', 0):.0f} s):", "", "```", *body, "```", "", END])


def write_readme(path: str, results: dict[str, Any]) -> None:
    """Replaces the results section of the README (appended when missing)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = readme_section(results)
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")


def listing(models: list[CorpusModel]) -> list[str]:
    """The corpus as a Markdown table: name, what it is, where it comes from."""
    rows = ["| name | model and input | source |", "|---|---|---|"]
    rows += [f"| `{m.name}` | {m.what} | {m.source.describe()} |" for m in models]
    return rows
