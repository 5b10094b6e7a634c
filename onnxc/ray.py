"""Batch inference on Ray Data with a compiled model (optional extra: ``pip install 'onnxc[ray]'``).

Compile once on the driver, put the artifact folder where every worker can read it, and map
the dataset's batches through :class:`Predictor`::

    onnxc.compile_model("model.onnx", "/shared/model", onnxc.CompileOptions(march="x86-64-v3"))
    ds = ds.map_batches(onnxc.ray.Predictor, fn_constructor_kwargs={"artifact": "/shared/model"},
                        batch_size=256, concurrency=4)

Ray Data builds one ``Predictor`` per worker process, so each worker loads the artifact once
(no compiler runs there) and calls it for every batch: a batch is one ``run`` with the model's
symbolic batch dim set to the batch's length (a model compiled for a fixed batch size runs
once per slice of that size). The model's outputs come back as columns of the batch, next to
the columns it came with. ``docs/scale-out.md`` shows a multi-node cluster.

This module does not import Ray: the class is what ``map_batches`` expects of a callable class,
so it also runs on its own (``Predictor(artifact=...)(batch)``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from .compiler import dtypes as dt
from .compiler.errors import InvalidArgument
from .runtime.options import SessionOptions
from .runtime.session import InferenceSession, NodeArg

Batch = dict[str, np.ndarray]


class Predictor:
    """Runs a compiled model over Ray Data batches (``dict`` of numpy columns, the default
    ``batch_format``); one instance per worker process.

    ``artifact``: a compiled artifact folder (``onnxc compile``, :func:`onnxc.compile_model`) or an
    ``.onnx`` file, which each worker then compiles or finds in the compile cache
    (``$ONNXC_CACHE_DIR``; workers sharing that folder build the model once).
    ``input_columns``: model input name -> column (default: the column of the same name).
    ``output_columns``: model output name -> column to write (default: every output, under its
    own name). ``keep_columns``: pass the batch's columns through next to the outputs.
    ``threads``: the session's ``intra_op_num_threads``; by default the CPUs Ray reserved for
    the worker (``map_batches(num_cpus=...)``, 1 unless set).
    """

    def __init__(self, artifact: Union[str, os.PathLike], *, input_columns: Optional[Mapping[str, str]] = None,
                 output_columns: Optional[Mapping[str, str]] = None, keep_columns: bool = True,
                 threads: Optional[int] = None, sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None) -> None:
        options = sess_options or SessionOptions()
        if sess_options is None:
            options.intra_op_num_threads = threads if threads is not None else _reserved_cpus()
        self.session = InferenceSession(os.fspath(artifact), options, providers=providers)
        inputs = self.session.get_inputs()
        self._columns = {arg.name: (input_columns or {}).get(arg.name, arg.name) for arg in inputs}
        unknown = set(input_columns or ()) - set(self._columns)
        if unknown:
            raise InvalidArgument(f"input_columns names no model input: {sorted(unknown)}; "
                                  f"the inputs are {list(self._columns)}")
        self._inputs = {arg.name: arg for arg in inputs}
        outputs = [arg.name for arg in self.session.get_outputs()]
        self._outputs = dict(output_columns) if output_columns is not None else {name: name for name in outputs}
        unknown = set(self._outputs) - set(outputs)
        if unknown:
            raise InvalidArgument(f"output_columns names no model output: {sorted(unknown)}; "
                                  f"the outputs are {outputs}")
        self._keep = keep_columns

    def __call__(self, batch: Mapping[str, Any]) -> Batch:
        feed = {name: self._column(batch, name) for name in self._columns}
        results = self._run(feed)
        out: Batch = dict(batch) if self._keep else {}
        for name, value in zip(self._outputs, results):
            out[self._outputs[name]] = value
        return out

    def _run(self, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One run for the batch, or, for a model compiled for a fixed batch size (its inputs'
        first dim a number), one run per slice of that size, the outputs concatenated."""
        if not feed:
            return self.session.run(list(self._outputs), feed)
        firsts = {arg.shape[0] if arg.shape else None for arg in self._inputs.values()}
        count = len(next(iter(feed.values())))
        size = firsts.pop() if len(firsts) == 1 else None
        if not isinstance(size, int) or size == count:
            return self.session.run(list(self._outputs), feed)
        if count % size:
            raise InvalidArgument(f"the model takes batches of exactly {size} rows (its inputs' first dim), "
                                  f"the batch has {count}: use a batch_size that is a multiple of {size}")
        names = list(self._outputs)
        parts = [self.session.run(names, {name: value[start:start + size] for name, value in feed.items()})
                 for start in range(0, count, size)]
        return [np.concatenate(outputs) for outputs in zip(*parts)]

    def _column(self, batch: Mapping[str, Any], name: str) -> np.ndarray:
        """The batch's column for input ``name`` as one array of the input's type: rows stacked
        along the batch dim (Ray hands tensors of unequal shapes over as an object array)."""
        column = self._columns[name]
        if column not in batch:
            raise InvalidArgument(f"input {name!r} reads column {column!r}, which the batch lacks "
                                  f"(columns: {sorted(batch)}); map it with input_columns")
        value = batch[column]
        if isinstance(value, np.ndarray) and value.dtype == object:
            value = np.stack(list(value))
        return np.asarray(value, dtype=_numpy_type(self._inputs[name]))


def _numpy_type(arg: NodeArg) -> np.dtype:
    text = arg.type
    if not (text.startswith("tensor(") and text.endswith(")")):
        raise InvalidArgument(f"input {arg.name!r} is a {text}: a dataset column can feed tensors only")
    return dt.by_name(text[len("tensor("):-1]).np


def _reserved_cpus() -> int:
    """The CPUs Ray reserved for this worker, or 1 outside a Ray worker."""
    try:
        import ray
        if ray.is_initialized():
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
            return max(1, int(cpus))
    except ImportError:
        pass
    return 1
