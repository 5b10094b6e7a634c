"""The ONNX backend API (``onnx.backend.base``) over onnxc.

Usage, as with ``onnxruntime.backend``::

    import onnxc.backend as backend
    rep = backend.prepare(model, device="CPU")      # compiles (or loads from the cache)
    outputs = rep.run([x])                           # or rep.run({"x": x})
    y = outputs[0]                                   # or outputs["y"]

The module itself is a backend (``prepare``, ``run_model``, ``run_node``,
``supports_device``, ``is_compatible``), so ``onnx.backend.test.BackendTest(onnxc.backend)``
drives it.
"""
from __future__ import annotations

import copy
import functools
import os
from typing import Any, Optional, Sequence

import numpy as np
import onnx
import onnx.inliner
from onnx import helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

from .compiler import frontend
from .compiler.errors import InvalidArgument, ModelError
from .runtime.options import GraphOptimizationLevel, RunOptions, SessionOptions
from .runtime.session import InferenceSession

__all__ = ["OnnxcBackend", "OnnxcBackendRep", "prepare", "run_model", "run_node", "supports_device",
           "is_compatible"]

_DEVICES = ("CPU", "CPU:0")

# Keyword arguments onnx's backend test runner forwards to ``prepare`` from its per-test
# settings; they are the runner's comparison tolerances, not options of the backend.
_RUNNER_KWARGS = ("rtol", "atol")


def _public_fields(obj: Any) -> list[str]:
    """The settable option names of a SessionOptions or RunOptions instance."""
    def settable(name: str) -> bool:
        prop = getattr(type(obj), name, None)
        return not (isinstance(prop, property) and prop.fset is None)
    return sorted(n for n in dir(obj)
                  if not n.startswith("_") and not callable(getattr(obj, n, None)) and settable(n))


def _apply_options(target: Any, kwargs: dict[str, Any], where: str) -> None:
    fields = _public_fields(target)
    unknown = sorted(k for k in kwargs if k not in fields)
    if unknown:
        raise TypeError(f"{where} got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                        f"the accepted ones are the {type(target).__name__} fields: {', '.join(fields)}")
    for name, value in kwargs.items():
        if name == "graph_optimization_level":
            try:
                value = GraphOptimizationLevel(int(value))
            except (TypeError, ValueError):
                levels = ", ".join(f"{m.name} ({m.value})" for m in GraphOptimizationLevel)
                raise ValueError(f"graph_optimization_level={value!r} is not one of {levels}") from None
        try:
            setattr(target, name, value)
        except AttributeError as e:
            raise TypeError(f"{where}: {type(target).__name__}.{name} cannot be set ({e})") from None


def _check_device(device: str) -> None:
    if not OnnxcBackend.supports_device(device):
        raise InvalidArgument(f"device {device!r} is not supported: onnxc runs models on 'CPU' only")


class OnnxcBackendRep(BackendRep):
    """A compiled model, ready to run repeatedly.

    ``run(inputs)`` takes the inputs as a list or tuple in graph input order (initializers
    are not inputs; ``None`` is an empty optional), a single array for a one-input model, or
    a dict of input name to value.
    Keyword arguments set RunOptions fields. It returns the outputs as a tuple that can also
    be indexed by output name.
    """

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._input_names = [i.name for i in session.get_inputs()]
        self._output_names = [o.name for o in session.get_outputs()]
        self._outputs_type = namedtupledict("Outputs", self._output_names)

    @property
    def session(self) -> InferenceSession:
        """The ``onnxc.InferenceSession`` that runs the model."""
        return self._session

    @property
    def input_names(self) -> list[str]:
        return list(self._input_names)

    @property
    def output_names(self) -> list[str]:
        return list(self._output_names)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        run_options = None
        if kwargs:
            run_options = RunOptions()
            _apply_options(run_options, kwargs, "run()")
        feed = self._feed(inputs)
        outputs = self._session.run(None, feed, run_options)
        return self._outputs_type(*outputs)

    def _feed(self, inputs: Any) -> dict[str, Any]:
        if isinstance(inputs, dict):
            return dict(inputs)
        if isinstance(inputs, (np.ndarray, np.generic)):
            inputs = [inputs]
        if not isinstance(inputs, (list, tuple)):
            raise InvalidArgument(f"inputs must be a list or tuple of arrays (in graph input order) or a dict "
                                  f"of input name to array, not {type(inputs).__name__}")
        if len(inputs) > len(self._input_names):
            raise InvalidArgument(f"the model has {len(self._input_names)} input(s) {self._input_names}, "
                                  f"got {len(inputs)} values")
        feed = {}
        for name, value in zip(self._input_names, inputs):
            if value is None:
                continue  # an empty optional (or an omitted input: reported as missing)
            if isinstance(value, np.generic):
                value = np.asarray(value)
            feed[name] = value
        return feed


class OnnxcBackend(Backend):
    """onnxc as an ONNX backend: models are compiled to C and run on the CPU."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device in _DEVICES

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        """False when the device is not the CPU or the model uses an operator (in any
        domain and opset, control-flow bodies included) onnxc does not implement."""
        if not cls.supports_device(device):
            return False
        model = _as_model_proto(model)
        if model.functions:
            try:
                model = onnx.inliner.inline_local_functions(model)
            except Exception:
                pass  # the function calls stay and are reported unsupported below
        opsets = frontend.opset_map(model)
        return all(frontend.is_supported(*key) for key in frontend.op_inventory(model, opsets))

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> OnnxcBackendRep:
        """Compile ``model`` (a ModelProto, serialized bytes or a file path) for ``device``.

        Keyword arguments set SessionOptions fields (``graph_optimization_level`` ...);
        any other raises TypeError. ``rtol`` and ``atol``, which onnx's test runner passes
        along, are ignored.
        """
        _check_device(device)
        options = SessionOptions()
        _apply_options(options, {k: v for k, v in kwargs.items() if k not in _RUNNER_KWARGS}, "prepare()")
        return OnnxcBackendRep(InferenceSession(model, sess_options=options))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[tuple[Any, Sequence[Any]]]] = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on ``inputs``: a list of values for the node's inputs (all of them,
        ``None`` where an optional one is omitted, or only the named ones) or a dict of input
        name to value. A value is an array, or a list of arrays for a sequence input.

        The model is typed from the values; output types come from ONNX shape inference, or
        from ``outputs_info`` ((dtype, shape) per named output) when given. ``opset_version``
        sets the default domain's opset (default: the newest the onnx package defines);
        other keyword arguments go to ``prepare``.
        """
        _check_device(device)
        opset_version = kwargs.pop("opset_version", None)
        model, feed = _node_model(node, inputs, outputs_info, opset_version)
        return cls.prepare(model, device, **kwargs).run(feed)


def _as_model_proto(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return onnx.load_model_from_string(bytes(model))
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model), load_external_data=False)
    raise TypeError(f"model must be an onnx.ModelProto, serialized bytes or a path, not {type(model).__name__}")


@functools.lru_cache(maxsize=None)
def _domain_versions() -> dict[str, int]:
    """The newest opset of every domain the onnx package defines."""
    out: dict[str, int] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        out[schema.domain] = max(out.get(schema.domain, 1), schema.since_version)
    out[""] = onnx.defs.onnx_opset_version()
    return out


def _bind_node_inputs(node: onnx.NodeProto, inputs: Any) -> dict[str, Any]:
    """Node input name -> value (None: omitted)."""
    names = list(node.input)
    present = [n for n in names if n]
    label = f"{node.op_type} node {node.name!r}" if node.name else f"{node.op_type} node"
    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - set(present))
        if unknown:
            raise InvalidArgument(f"{label} has no input(s) {unknown}; its inputs are {present}")
        return {n: inputs.get(n) for n in present}
    if isinstance(inputs, (np.ndarray, np.generic)):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        raise InvalidArgument(f"inputs must be a list or tuple of values or a dict, not {type(inputs).__name__}")
    if len(inputs) == len(names):
        pairs = list(zip(names, inputs))
    elif len(inputs) == len(present):
        pairs = list(zip(present, inputs))
    else:
        raise InvalidArgument(f"{label} has {len(names)} input(s) ({len(present)} named), got {len(inputs)} values")
    bound: dict[str, Any] = {}
    for name, value in pairs:
        if not name:
            if value is not None:
                raise InvalidArgument(f"{label}: a value was given for an omitted (empty-named) input")
            continue
        bound.setdefault(name, value)
    return bound


def _typed_value(name: str, value: Any) -> tuple[onnx.ValueInfoProto, Any]:
    if isinstance(value, (list, tuple)):
        items = [_tensor_value(v) for v in value]
        if not items:
            raise InvalidArgument(f"input {name!r}: the element type of an empty sequence is unknown")
        elem = helper.np_dtype_to_tensor_dtype(items[0].dtype)
        if len({a.ndim for a in items}) > 1:
            raise InvalidArgument(f"input {name!r}: the tensors of a sequence must have the same rank")
        # element dims that differ between the tensors stay unnamed
        shape = [d if all(a.shape[k] == d for a in items) else None for k, d in enumerate(items[0].shape)]
        return helper.make_tensor_sequence_value_info(name, elem, shape), items
    array = _tensor_value(value)
    elem = helper.np_dtype_to_tensor_dtype(array.dtype)
    return helper.make_tensor_value_info(name, elem, list(array.shape)), array


def _tensor_value(value: Any) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        value = onnx.numpy_helper.to_array(value)
    array = np.asarray(value)
    if array.dtype.kind in "US":
        array = array.astype(object)
    return array


def _node_model(node: onnx.NodeProto, inputs: Any, outputs_info: Any,
                opset_version: Optional[int]) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A one-node model for ``node`` typed from its input values, and its feed."""
    bound = _bind_node_inputs(node, inputs)
    node = copy.deepcopy(node)
    omitted = {n for n, v in bound.items() if v is None}
    for i, name in enumerate(node.input):
        if name in omitted:
            node.input[i] = ""
    graph_inputs, feed = [], {}
    for name, value in bound.items():
        if value is None:
            continue
        info, array = _typed_value(name, value)
        graph_inputs.append(info)
        feed[name] = array

    out_names = [n for n in node.output if n]
    if outputs_info is not None:
        outputs_info = list(outputs_info)
        if len(outputs_info) != len(out_names):
            raise InvalidArgument(f"outputs_info has {len(outputs_info)} entries for {len(out_names)} outputs")
        graph_outputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(d)), list(s))
                         for n, (d, s) in zip(out_names, outputs_info)]
    else:
        graph_outputs = [helper.make_empty_tensor_value_info(n) for n in out_names]

    domain = "" if node.domain == "ai.onnx" else node.domain
    versions = dict(_domain_versions())
    if opset_version is not None:
        versions[""] = int(opset_version)
    opsets = {"": versions[""]}
    if domain:
        opsets[domain] = versions.get(domain, 1)
    graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                              producer_name="onnxc.backend.run_node")

    if outputs_info is None:
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:
            raise ModelError(f"cannot infer the output types of the {node.op_type} node ({e}); "
                             f"pass outputs_info") from e
        for declared, found in zip(model.graph.output, inferred.graph.output):
            if found.type.WhichOneof("value") is None or (
                    found.type.HasField("tensor_type") and not found.type.tensor_type.elem_type):
                raise ModelError(f"cannot infer the type of output {declared.name!r} of the {node.op_type} node; "
                                 f"pass outputs_info")
            declared.type.CopyFrom(found.type)
    return model, feed


prepare = OnnxcBackend.prepare
run_model = OnnxcBackend.run_model
run_node = OnnxcBackend.run_node
supports_device = OnnxcBackend.supports_device
is_compatible = OnnxcBackend.is_compatible
