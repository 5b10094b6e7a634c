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
