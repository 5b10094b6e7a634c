"""The CUDA backend: the C emitter's translation unit with its node functions compiled as
device functions (``templates/cuda/model.cu.j2`` extends ``c/model.c.j2``).

What differs from the C build is data and a few overrides: every constant goes to the weights,
which a session copies to the device once; inputs are copied to the device after their dims
are bound; outputs are computed in device memory and copied back at the end of a run; heap
values and scratch come from cudaMalloc. Each node function is launched by a kernel of its own
in stream order (a family with a template under ``templates/cuda/`` is launched over many
threads, see ``parallel_template``); output dims computed from data are computed on the host
from copies of the tensors they depend on, and control flow and the nodes of sequences and
optionals, and of string tensors (which all live in host memory) run on the host between
kernels. Custom ops are refused before, by the driver: the session runs such a model on the CPU.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import jinja2
import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import UnsupportedError
from ..compiler.ir import Node, Value
from .c_emitter import WEIGHT_ALIGN, CEmitter, CModel, _ctype, _Loc
from .names import c_string
from .templates import environment


@functools.lru_cache(maxsize=None)
def parallel_template(template: str) -> Optional[str]:
    """The CUDA template of a kernel family, ``cuda/NAME.cu.j2`` for ``c/NAME.c.j2``, if there is one.

    It takes the C template's data and sets ``launch``: ``items`` (a C expression: the work
    items), ``threads`` (per block, 256 if unset), ``per_block`` (the items one block takes in a
    pass: ``threads`` for grid-stride loops over elements, 1 for a block per row) and ``sync``
    (the block's threads meet at ``__syncthreads``). Families without one run their C loops in
    one thread."""
    if not (template.startswith("c/") and template.endswith(".c.j2")):
        return None
    name = "cuda/" + template[2:-len(".c.j2")] + ".cu.j2"
    try:
        environment().get_template(name)
    except jinja2.TemplateNotFound:
        return None
    return name


class CudaEmitter(CEmitter):
    source_template = "cuda/model.cu.j2"

    def __init__(self, *args: Any, device: int = 0, tf32: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device = device
        self.tf32 = tf32

    def _emit_checked(self) -> CModel:
        if self.opt.profile or self.opt.inter_threads or self.opt.embedded:
            raise UnsupportedError("CUDA builds do not profile nodes or run them on host threads")
        return super().emit()

    def _helper_data(self, used_types: set) -> dict[str, Any]:
        return {**super()._helper_data(used_types), "embedded": True}   # portable C on the device

    def _abi_features(self) -> set[str]:
        return super()._abi_features() | {"cuda"}

    def _template_data(self, data: dict[str, Any]) -> dict[str, Any]:
        why = self._graph_obstacles()
        in_dims = sum(len(v.shape) for v in self.g.inputs if v.is_tensor)
        graph = {"ok": not why, "why": c_string("; ".join(why) or "-"), "in_dims": in_dims}
        return {**data, "cuda": True, "cuda_device": int(self.device), "cuda_tf32": bool(self.tf32),
                "cuda_graph": graph}

    def _graph_obstacles(self) -> list[str]:
        """Why a run of this model cannot be captured as a CUDA graph (enable_cuda_graph): work
        on the host in the middle of a run."""
        return [f"{st['comment']} {st['host_why']}" for st in self.steps
                if st["kind"] == "call" and st.get("host")][:3]

    @staticmethod
    def _on_host(node: Node) -> Optional[str]:
        """Why ``node`` runs on the host, if it does: control flow (If, Loop, Scan, SequenceMap)
        as onnxruntime's CUDA provider runs it, and the nodes that make or read sequences and
        optionals, which live in host memory (lists of tensors of their own sizes, made and
        resized at run time)."""
        if node.subgraphs:
            return "control flow"
        values = [v for v in list(node.inputs) + list(node.outputs) if v is not None]
        if any(not v.is_tensor for v in values):
            return "sequences and optionals live in host memory"
        if any(v.dtype is dt.STRING for v in values):
            return "string tensors live in host memory"
        if node.impl.allocates_outputs:
            return "outputs allocated at run time"
        return None

    def _emit_node(self, index: int, node: Node) -> None:
        """A node that runs on the host (``_on_host``) is the C build's kernel, called between the
        kernels on host copies of the tensors it reads; the tensors it makes go to the device
        (adopted ones, or its outputs' places there). Control flow bodies' nodes run on the host
        too."""
        first_fn, first_step = len(self.unit.functions), len(self.steps)
        super()._emit_node(index, node)
        for st in self.steps[first_step:]:
            if st["kind"] == "call" and st.get("host"):
                st["host_why"] = "computes output dims from data on the host"
        why = self._on_host(node)
        if why is None:
            return
        for fn in self.unit.functions[first_fn:]:
            fn["host"] = True
            if fn["kind"] == "body":
                fn["run"]["host_run"] = True
        call = [st for st in self.steps[first_step:] if st["kind"] == "call"][-1]
        if call.get("scratch"):
            raise UnsupportedError(f"not on the GPU: {node.label} needs scratch memory on the host")
        args = list(call["args"])
        for j, t in enumerate(call["reads"]):
            args[t["pos"]] = f"(const {t['ctype']} *)staged{j}"
        # tensors it writes in place (not adopted): made in host buffers, then copied to theirs
        results = []
        if not node.impl.allocates_outputs:
            first_out = len(args) - len(node.outputs)
            for j, v in enumerate(node.outputs):
                if self._on_device(v):
                    pos = first_out + j
                    results.append({"bytes": self._nbytes_expr(v), "ctype": _ctype(v), "var": args[pos]})
                    args[pos] = f"({_ctype(v)} *)result{len(results) - 1}"
        call.update(host=True, host_why=f"runs on the host ({why})", host_args=args, results=results,
                    stage=[{"bytes": t["bytes"], "ctype": t["ctype"], "var": call["args"][t["pos"]]}
                           for t in call["reads"]])
        outputs = iter(node.outputs)
        for st in self.steps[first_step:]:
            if st["kind"] == "adopt":
                v = next(outputs)
                if self._on_device(v):
                    st["upload"] = self._nbytes_expr(v)

    def emit(self) -> CModel:
        model = self._emit_checked()
        why = self._graph_obstacles()
        model.extra["cuda_graph"] = "; ".join(why) if why else ""
        return model

    def _output_slots(self) -> dict[int, list[int]]:
        return {}   # outputs are computed on the device and copied back

    def _place_const(self, v: Value) -> None:
        """Every constant in the weights: the device reads them from its copy."""
        if id(v) in self.unit.const_locs:
            return
        if v.dtype is dt.STRING:   # pointers to literals: in the source, read by nodes on the host
            super()._place_const(v)
            return
        raw = np.asarray(v.const, order="C").tobytes()
        weights = self.unit.weights
        weights.extend(b"\0" * ((-len(weights)) % WEIGHT_ALIGN))
        offset = len(weights)
        weights.extend(raw)
        self.unit.const_locs[id(v)] = _Loc(self.mangle(v.name, "w_"), "weight", offset=offset, ctype=v.dtype.c_type)

    def _host_only(self, v: Value) -> bool:
        return v.dtype is dt.STRING   # arrays of pointers to host strings (the context's pool)

    def _random_stream(self, node: Node) -> Optional[int]:
        """None: the generator's state (the run's number, the nodes' calls) lives in the host's
        context, which device code does not see; random ops are refused (the session runs the
        model on the CPU) and a training Dropout fails when it runs."""
        return None

    def _render_kernel(self, template: str, data: dict[str, Any], node: Node) -> tuple[str, Optional[dict[str, Any]]]:
        name = parallel_template(template)
        empty = any(v.is_tensor and 0 in v.shape for v in node.outputs)
        if name is None or empty or self._on_host(node):   # (nothing to spread over threads: the C loops, which run no iteration)
            return super()._render_kernel(template, data, node)
        module = environment().get_template(name).make_module(data)
        launch = getattr(module, "launch", None)
        if launch is None:       # this variant of the family stays serial
            return str(module), None
        threads = int(launch.get("threads", 256))
        return str(module), {"items": str(launch["items"]), "threads": threads,
                             "per_block": int(launch.get("per_block", threads)), "sync": bool(launch.get("sync", False))}

    def _bind_inputs(self) -> None:
        super()._bind_inputs()
        if self.is_body:
            return
        for i, v in enumerate(self.entry_inputs):
            if not self._on_device(v):   # sequences, optionals and strings stay in host memory
                continue
            loc = self.locs[id(v)]
            self.steps.append({"kind": "to_device", "index": i, "var": loc.var, "ctype": _ctype(v),
                               "bytes": self._nbytes_expr(v)})

    def emit_function(self) -> dict[str, Any]:
        body = super().emit_function()
        body["device_inputs"] = [st["var"] for st in self.steps if st["kind"] == "to_device"]
        return body
