"""Models with values whose rank is known only at run time, compiled once per input signature.

The compiler gives every value a fixed rank. Where a rank depends on what the model is fed
(an If whose branches give different ranks, a Squeeze without axes of a symbolic dim, a
Reshape to a shape of run-time length), the compile raises ``RankKnownAtRunTime`` and the
artifact holds the model instead of a library (driver._write_specialising). A
:class:`SpecialisingModel` then compiles the model for each input signature it meets:

1. the dims of every tensor input: enough where ranks follow from input shapes, as the
   ``If(Equal(Shape(x)[k], 1))`` that exporters write for ``squeeze(k)``;
2. where that is not enough (the rank follows from input *values*: affine_grid's size; or an
   If on a value input has a branch the shapes do not fit: silero's If on the sample rate),
   also the elements of the small integer and bool inputs, which become constants of the
   compiled code, so that an If on them keeps only the branch taken.

Each specialisation is an ordinary artifact in the compile cache, keyed by the signature, so
a later session (or process) with the same signature loads it without compiling.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable

import numpy as np

from ..compiler.errors import RankKnownAtRunTime, ShapeError
from ..driver import SPECIALISED_MODEL, CompileOptions

# Integer and bool inputs up to this many elements may be taken as constants (step 2): shape-like
# tensors (sizes, axes, a sample rate, a flag), never a model's data.
MAX_VALUE_ELEMENTS = 16

Build = Callable[[str, CompileOptions], str]          # (model path, options) -> artifact folder
Load = Callable[[str], Any]                           # artifact folder -> CompiledModel


class SpecialisingModel:
    """The interface of a CompiledModel over one compiled model per input signature."""

    plain = False   # (the session checks every feed, then calls run)

    def __init__(self, folder: str, manifest: dict[str, Any], build: Build, load: Load) -> None:
        self.folder = folder
        self.manifest = manifest
        self.inputs = manifest["inputs"]
        self.outputs = manifest["outputs"]
        self._model_path = os.path.join(folder, SPECIALISED_MODEL)
        self._options = CompileOptions.from_manifest(manifest["options"])
        self._build = build
        self._load = load
        self._by_shapes: dict[tuple, Any] = {}    # shape signature -> model, or None: values needed too
        self._by_values: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @property
    def specialisations(self) -> int:
        """How many signatures this model has been compiled (or loaded from the cache) for."""
        return sum(m is not None for m in self._by_shapes.values()) + len(self._by_values)

    def _shapes(self, arrays: list[Any]) -> tuple:
        return tuple((info["name"], tuple(int(d) for d in a.shape)) for info, a in zip(self.inputs, arrays)
                     if info.get("kind", "tensor") == "tensor")

    def _values(self, arrays: list[Any]) -> tuple:
        return tuple((info["name"], info["dtype"], tuple(int(d) for d in a.shape),
                      tuple(int(x) for x in np.asarray(a).reshape(-1)))
                     for info, a in zip(self.inputs, arrays)
                     if info.get("kind", "tensor") == "tensor" and np.asarray(a).dtype.kind in "biu"
                     and np.asarray(a).size <= MAX_VALUE_ELEMENTS)

    def _compile(self, shapes: tuple, values: tuple) -> Any:
        options = dataclasses.replace(self._options, input_shapes=shapes, input_values=values)
        return self._load(self._build(self._model_path, options))

    def specialised(self, arrays: list[Any]) -> Any:
        """The compiled model for the signature of ``arrays`` (compiled on first use)."""
        shapes = self._shapes(arrays)
        with self._lock:
            values = self._values(arrays)
            if shapes not in self._by_shapes:
                try:
                    self._by_shapes[shapes] = self._compile(shapes, ())
                except (RankKnownAtRunTime, ShapeError):
                    # A rank still depends on values, or a branch these shapes do not fit is
                    # typed although a value input never takes it (silero's If on the sample
                    # rate): with those values as constants, the If keeps only its branch.
                    if not values:
                        raise
                    self._by_shapes[shapes] = None
            model = self._by_shapes[shapes]
            if model is not None:
                return model
            key = (shapes, values)
            if key not in self._by_values:
                # refused again: the rank follows from what no signature fixes (e.g. NonZero's count)
                self._by_values[key] = self._compile(*key)
            return self._by_values[key]

    def run(self, arrays: list[Any], watcher: Any = None, events: list | None = None,
            out_buffers: list | None = None) -> list[Any]:
        model = self.specialised(arrays)
        wanted = {i["name"] for i in model.inputs}   # inputs taken as constants are not passed
        feed = [a for info, a in zip(self.inputs, arrays) if info["name"] in wanted]
        return model.run(feed, watcher, events, out_buffers)


# --- shape tiers ------------------------------------------------------------------------------

SHAPES_KEY = "session.onnxc.specialise_shapes"
SHAPES_ENV = "ONNXC_SPECIALISE_SHAPES"     # the default of sessions that do not set the key
SHAPES_MODES = ("background", "sync", "off")
# A signature is built for once it has been run this many times (a shape met once is not)...
SHAPES_AFTER = 2
# ... and a session builds at most this many (a model fed ever-changing shapes stays generic).
SHAPES_LIMIT = 4
SHAPES_NICE = 10   # the background build's scheduling priority, below the runs'

Lookup = Callable[[tuple], "str | None"]   # signature -> its artifact folder in the cache, or None


class ShapeTiers:
    """A model compiled for symbolic input dims (the generic build, which runs any shape), and
    builds of it for the input shapes it is run at, once a shape has been run SHAPES_AFTER
    times: with every dim known, the planned kernels apply (Winograd, gathered and depthwise
    convolutions, pooling planes, static loops), where a symbolic height or width leaves a
    convolution net on the generic loops, and the intermediates share one planned arena (a
    free batch alone leaves them to the allocator). A build is an ordinary artifact in the compile cache,
    keyed by the signature, so a later session finds it there and runs it from its first run.

    ``background`` (the default) builds in a thread at a lower priority while the generic
    build keeps serving every run, so no run waits for a compiler; ``sync`` builds in the run
    that reaches the count (deterministic: tests, benchmarks that want the steady state at
    once). A build that fails leaves that shape on the generic build, with a warning in the log."""

    def __init__(self, generic: Any, build: Callable[[tuple], str], lookup: Lookup, load: Load, log: Any,
                 mode: str = "background") -> None:
        self.generic = generic
        self.manifest, self.inputs, self.outputs = generic.manifest, generic.inputs, generic.outputs
        self.plain = False            # (the session checks every feed, then calls run)
        self._build, self._lookup, self._load, self._log, self._mode = build, lookup, load, log, mode
        self._ready: dict[tuple, Any] = {}      # signature -> its build, loaded
        self._seen: dict[tuple, int] = {}       # signature -> runs so far (until it is built or given up)
        self._pending: dict[tuple, threading.Thread | None] = {}   # (None: a sync build under way)
        self._lock = threading.Lock()

    @property
    def specialisations(self) -> int:
        """How many input signatures have a build of their own, loaded."""
        return len(self._ready)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background builds under way; whether none is left."""
        with self._lock:
            threads = list(self._pending.values())
        for t in threads:
            if t is not None and t is not threading.current_thread():
                t.join(timeout)
        with self._lock:
            return not self._pending

    def _signature(self, arrays: list[Any]) -> tuple:
        return tuple(tuple(int(d) for d in a.shape) for a in arrays)

    def _builder(self, signature: tuple) -> None:
        if self._mode == "background":
            try:   # (Linux: a thread's own priority, which the compiler processes it starts inherit)
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), SHAPES_NICE)
            except (AttributeError, OSError):
                pass
        model = None
        try:
            model = self._load(self._build(signature))
        except Exception as e:   # a build is an optimisation: the generic build still runs this shape
            self._log.warning("no build for input shapes %s (%s: %s); the generic build runs them",
                              list(signature), type(e).__name__, e)
        with self._lock:
            self._pending.pop(signature, None)
            if model is not None:
                self._ready[signature] = model
            self._seen[signature] = -1   # (built or given up: never again)

    def _note(self, signature: tuple) -> None:
        """Count a run at ``signature``; start its build when the count is reached."""
        start = False
        with self._lock:
            if signature in self._ready or signature in self._pending:
                return
            seen = self._seen.get(signature, 0)
            if seen < 0 or len(self._ready) + len(self._pending) >= SHAPES_LIMIT:
                return
            if seen == 0:
                cached = self._lookup(signature)
                if cached is not None:   # built by an earlier session: run it from now on
                    try:
                        self._ready[signature] = self._load(cached)
                        return
                    except Exception:
                        pass
            self._seen[signature] = seen + 1
            if seen + 1 >= SHAPES_AFTER:
                start = True
                self._log.info("building the model for input shapes %s (%s)", list(signature), self._mode)
                thread = None
                if self._mode == "background":
                    thread = threading.Thread(target=self._builder, args=(signature,), daemon=True,
                                              name="onnxc-shape-build")
                self._pending[signature] = thread
                if thread is not None:
                    thread.start()
        if start and self._mode == "sync":
            self._builder(signature)

    def run(self, arrays: list[Any], watcher: Any = None, events: list | None = None,
            out_buffers: list | None = None) -> list[Any]:
        signature = self._signature(arrays)
        model = self._ready.get(signature)
        if model is None:
            self._note(signature)
            model = self._ready.get(signature, self.generic)
        return model.run(arrays, watcher, events, out_buffers)


def specialises_shapes(inputs: list[dict[str, Any]]) -> bool:
    """Whether builds for the shapes met would differ from the generic build's plan: a tensor
    input has a symbolic dim. A free batch alone counts too: the planned kernels take it as a
    loop count, but the generic build leaves every intermediate of a symbolic size to the
    allocator, where the build for a batch plans one arena, outputs written over their inputs
    and Concat inputs produced in place (torchvision's exports, whose batch is free: 5-10% less
    time at 1 and 2 threads, open_nsfw 17.5 -> 16.3 ms at 1 thread, RegNetY-800MF 8.9 -> 8.0 ms
    at 2, Sapphire Rapids)."""
    return all(i.get("kind", "tensor") == "tensor" for i in inputs) and \
        any(not isinstance(d, int) for i in inputs for d in i["shape"])
