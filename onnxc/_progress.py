"""A compile's stages as people see them (the driver's ``on_stage`` callback): their times
for the session's log, and ``onnxc compile``'s display.

On a terminal, a progress bar (tqdm, when it is installed) names the stage in progress
and counts the translation units built; elsewhere, or without tqdm, one plain line per
stage as it ends.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

# The stages of a compile in order, as the summary names them.
STAGES = ("load/check", "passes", "codegen", "C compile", "link")


class CompileProgress:
    """An ``on_stage`` callback that records each stage's time and, when ``stream`` is
    given, shows them: ``live`` redraws one progress bar, else one line per stage."""

    def __init__(self, stream: Optional[TextIO] = None, live: bool = False) -> None:
        self.stream = stream
        self.start = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.stage = STAGES[0]          # the stage in progress (the one a failure happened in)
        self.passes = 0
        self.units = 0
        self.built = 0
        self._printed: set[str] = set()
        self._mark = self.start
        self._bar: Any = None
        if stream is not None and live:
            try:
                from tqdm import tqdm
            except ImportError:     # (an optional dependency: plain lines instead)
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=None, file=stream, desc=self.stage, leave=False, unit="unit",
                                 bar_format="{desc} {elapsed}")

    def __call__(self, stage: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = {"pass": "passes", "compile": "C compile"}.get(stage, stage)
        if name != self.stage and self.stage in self.seconds:
            self._ended(self.stage)
        # (units build in parallel: the C compile's time is the wall time until the last one)
        self.seconds[name] = self.seconds.get(name, 0.0) + (now - self._mark if stage == "compile"
                                                              else info["seconds"])
        self._mark = now
        self.stage = name
        detail = ""
        if stage == "pass":
            self.passes += 1
            detail = f"after {info['name']}"
        elif stage == "codegen":
            self.units = info["units"]
        elif stage == "compile":
            self.built = info["done"]
        if stage != "pass" and (stage != "compile" or info["done"] == info["total"]):
            self._ended(name)
            self.stage = STAGES[STAGES.index(name) + 1] if STAGES.index(name) + 1 < len(STAGES) else name
        self._show(detail)

    def _show(self, detail: str) -> None:
        if self._bar is None:
            return
        if self.stage == "C compile":
            if self._bar.total != self.units:
                self._bar.reset(total=self.units)
                self._bar.bar_format = "{desc} {bar} {n_fmt}/{total_fmt} units {elapsed}"
            self._bar.n = self.built
        self._bar.set_description_str(f"{self.stage} ({detail})" if detail else self.stage, refresh=False)
        self._bar.refresh()

    def _ended(self, stage: str) -> None:
        if self.stream is None or self._bar is not None or stage in self._printed:
            return
        self._printed.add(stage)
        detail = {"passes": f" ({self.passes} passes)",
                  "C compile": f" ({self.units} unit{'s' if self.units != 1 else ''})"}.get(stage, "")
        self.stream.write(f"{stage} {self.seconds.get(stage, 0.0):.2f}s{detail}\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def total(self) -> float:
        return time.perf_counter() - self.start

    def summary(self) -> str:
        return "stages: " + ", ".join(f"{s} {self.seconds[s]:.2f}s" for s in STAGES if s in self.seconds)


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
