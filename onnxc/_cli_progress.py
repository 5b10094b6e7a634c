"""``onnxc compile`` with its stages reported: load/check, passes, code generation, C compile.

``compile_model`` takes no progress callback, so the stages are observed from the
outside: for the duration of one call the driver's pipeline and emitter entry points
are wrapped (the command line compiles one model at a time, on one thread) and the
options hand out a toolchain whose ``build_shared`` reports first. The artifact is
exactly the one ``compile_model`` writes; a hook that cannot be installed only
merges its stage into the previous one.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, TextIO

STAGES = ("load/check", "passes", "codegen", "C compile")

# on_stage(stage, detail): stage is one of STAGES; detail names the pass just finished.
StageCallback = Callable[[str, Optional[str]], None]


@contextlib.contextmanager
def _driver_hooks(on_stage: StageCallback) -> Iterator[None]:
    from . import driver
    saved: dict[str, Any] = {}
    real_pipeline = getattr(driver, "run_pipeline", None)
    if callable(real_pipeline):
        takes_trace = "trace" in inspect.signature(real_pipeline).parameters

        def run_pipeline(graph, *args, **kwargs):
            on_stage("passes", None)
            if takes_trace:
                outer = kwargs.get("trace")

                def trace(name, g):
                    on_stage("passes", name)
                    if outer is not None:
                        outer(name, g)
                kwargs["trace"] = trace
            return real_pipeline(graph, *args, **kwargs)
        saved["run_pipeline"] = real_pipeline
        driver.run_pipeline = run_pipeline
    real_emitter = getattr(driver, "CEmitter", None)
    if callable(real_emitter):
        def emitter(*args, **kwargs):
            on_stage("codegen", None)
            return real_emitter(*args, **kwargs)
        saved["CEmitter"] = real_emitter
        driver.CEmitter = emitter
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(driver, name, value)


def _hook_toolchain(options: Any, on_stage: StageCallback) -> None:
    """``options.toolchain()`` returns a toolchain that reports the C compile when it starts."""
    make = options.toolchain

    def toolchain():
        tc = make()
        build = getattr(tc, "build_shared", None)
        if callable(build):
            def build_shared(*args, **kwargs):
                on_stage("C compile", None)
                return build(*args, **kwargs)
            tc.build_shared = build_shared
        return tc
    options.toolchain = toolchain  # an instance attribute: not a dataclass field, not in the cache key


class StageTimer:
    """Records when each stage starts; ``durations()`` gives seconds per stage reached."""

    def __init__(self, listener: Optional[Callable[["StageTimer"], None]] = None) -> None:
        self.start = time.perf_counter()
        self.marks: list[tuple[str, float]] = [(STAGES[0], self.start)]
        self.detail: Optional[str] = None
        self.end: Optional[float] = None
        self._listener = listener

    @property
    def stage(self) -> str:
        return self.marks[-1][0]

    def __call__(self, stage: str, detail: Optional[str]) -> None:
        if stage != self.stage:
            self.marks.append((stage, time.perf_counter()))
            self.detail = None
        if detail is not None:
            self.detail = detail
        if self._listener is not None:
            self._listener(self)

    def finish(self) -> None:
        self.end = time.perf_counter()

    def durations(self) -> list[tuple[str, float]]:
        end = self.end if self.end is not None else time.perf_counter()
        times = [t for _, t in self.marks[1:]] + [end]
        return [(stage, t1 - t0) for (stage, t0), t1 in zip(self.marks, times)]


class Display:
    """Shows the current stage on ``stream``: one line redrawn in place on a terminal
    (with the elapsed time ticking), one line per stage otherwise."""

    def __init__(self, stream: TextIO, live: bool) -> None:
        self.stream = stream
        self.live = live
        self._timer: Optional[StageTimer] = None
        self._shown = ""
        self._printed_stage: Optional[str] = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None

    def attach(self, timer: StageTimer) -> None:
        self._timer = timer
        self.update(timer)
        if self.live:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.1):
            if self._timer is not None:
                self.update(self._timer)

    def update(self, timer: StageTimer) -> None:
        with self._lock:
            number = STAGES.index(timer.stage) + 1 if timer.stage in STAGES else 0
            if not self.live:
                if timer.stage != self._printed_stage:
                    self._printed_stage = timer.stage
                    self.stream.write(f"[{number}/{len(STAGES)}] {timer.stage}\n")
                    self.stream.flush()
                return
            detail = f" (after {timer.detail})" if timer.detail else ""
            line = (f"[{number}/{len(STAGES)}] {timer.stage}{detail}  "
                    f"{time.perf_counter() - timer.start:.1f}s")
            if line != self._shown:
                self._shown = line
                self.stream.write("\r\x1b[K" + line)
                self.stream.flush()

    def close(self, timer: Optional[StageTimer], ok: bool) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.live and self._shown:
                self.stream.write("\r\x1b[K")
            if ok and timer is not None:
                self.stream.write("stages: " + ", ".join(f"{s} {d:.2f}s" for s, d in timer.durations()) + "\n")
            self.stream.flush()


def compile_with_stages(source: Any, output_dir: str, options: Any, command: Optional[str],
                        display: Optional[Display] = None) -> tuple[dict[str, Any], StageTimer]:
    """``compile_model(source, output_dir, options, command)``, timing each stage.

    Returns the manifest and the timer. An exception propagates with a ``stage``
    attribute set to the stage it happened in (when it allows attributes)."""
    from .driver import compile_model
    timer = StageTimer(display.update if display is not None else None)
    if display is not None:
        display.attach(timer)
    ok = False
    try:
        _hook_toolchain(options, timer)
        with _driver_hooks(timer):
            manifest = compile_model(source, output_dir, options, command=command)
        timer.finish()
        ok = True
        return manifest, timer
    except Exception as e:
        with contextlib.suppress(AttributeError, TypeError):
            e.stage = timer.stage  # type: ignore[attr-defined]
        raise
    finally:
        with contextlib.suppress(AttributeError):
            del options.toolchain
        if display is not None:
            display.close(timer, ok)


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
