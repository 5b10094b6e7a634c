"""The CUDA backend: the C emitter's translation unit with its node functions compiled as
device functions (``templates/cuda/model.cu.j2`` extends ``c/model.c.j2``, and the steps of the
entry point are rendered by ``cuda/steps.j2``).

What differs from the C build is data and a few overrides: every constant goes to the weights,
which a session copies to the device once; inputs are copied to the device after their dims
are bound; outputs are computed in device memory and copied back at the end of a run; heap
values and scratch come from cudaMalloc. Each node function is launched by a kernel of its own
in stream order (a family with a template under ``templates/cuda/`` is launched over many
threads as its function in ``cuda_shells`` decides, see ``parallel_template``); output dims
computed from data are computed on the host from copies of the tensors they depend on, and
control flow and the nodes of sequences and optionals, and of string tensors (which all live in
host memory) run on the host between kernels. Custom ops are refused before, by the driver: the
session runs such a model on the CPU.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import jinja2
import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import UnsupportedError
from ..compiler.ir import Node, Value
from . import cuda_shells
from . import steps as st
from .c_emitter import CEmitter, CModel, _ctype, _Loc
from .cuda_shells import Shell
from .kernel import Kernel
from .names import c_string
from .templates import environment, render


@functools.lru_cache(maxsize=None)
def parallel_template(template: str) -> Optional[str]:
    """The CUDA template of a kernel family, ``cuda/NAME.cu.j2`` for ``c/NAME.c.j2``, if there is one.

    It takes the C template's data and ``shell``, what the family's function in ``cuda_shells``
    decided (the variant to render). Families without one run their C loops in one thread."""
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
    step_template = "cuda/steps.j2"
    LOCAL_DIMS = False

    def __init__(self, *args: Any, device: int = 0, tf32: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device = device
        self.tf32 = tf32
        self._host_functions: set[str] = set()   # node functions that run on the host

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
        functions = [{**fn, "host": True} if fn["kind"] == "node" and fn["name"] in self._host_functions else fn
                     for fn in data["functions"]]
        return {**data, "functions": functions, "cuda_device": int(self.device),
                "cuda_tf32": bool(self.tf32), "cuda_graph": graph}

    def _graph_obstacles(self) -> list[str]:
        """Why a run of this model cannot be captured as a CUDA graph (enable_cuda_graph): work
        on the host in the middle of a run."""
        return [f"{s.comment} {s.why}" for s in self.steps if isinstance(s, st.HostCall)][:3]

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
        """The functions of a node that runs on the host (``_on_host``), its control-flow bodies'
        too, are host functions: no kernel launches them."""
        first_fn = len(self.unit.functions)
        super()._emit_node(index, node)
        if self._on_host(node) is not None:
            self._host_functions.update(fn["name"] for fn in self.unit.functions[first_fn:])

    def _node_call(self, node: Node, call: st.Call) -> st.Step:
        """A node that runs on the host is the C build's kernel, called between the kernels on
        host copies of the tensors it reads; the tensors it writes in place are made in host
        buffers, then copied to their places on the device (those it allocates itself are
        adopted, see ``steps.Adopt``)."""
        why = self._on_host(node)
        if why is None:
            return call
        if call.scratch:
            raise UnsupportedError(f"not on the GPU: {node.label} needs scratch memory on the host")
        args = list(call.args)
        for j, t in enumerate(call.reads):
            args[t.pos] = f"(const {t.ctype} *)staged{j}"
        results = []
        if not node.impl.allocates_outputs:
            first_out = len(args) - len(node.outputs)
            for j, v in enumerate(node.outputs):
                if self._on_device(v):
                    pos = first_out + j
                    results.append(st.Staged(self._nbytes_expr(v), _ctype(v), args[pos]))
                    args[pos] = f"({_ctype(v)} *)result{len(results) - 1}"
        stage = [st.Staged(t.bytes, t.ctype, call.args[t.pos]) for t in call.reads]
        return st.HostCall(call.fn, call.args, call.comment, f"runs on the host ({why})", args, stage, results,
                           call.prof)

    def emit(self) -> CModel:
        model = self._emit_checked()
        why = self._graph_obstacles()
        model.extra["cuda_graph"] = "; ".join(why) if why else ""
        return model

    def _output_slots(self) -> dict[Value, list[int]]:
        return {}   # outputs are computed on the device and copied back

    def _place_const(self, v: Value) -> None:
        """Every constant in the weights: the device reads them from its copy."""
        if v in self.unit.const_locs:
            return
        if v.dtype is dt.STRING:   # pointers to literals: in the source, read by nodes on the host
            super()._place_const(v)
            return
        offset = self.unit.weights.place(np.asarray(v.const, order="C").reshape(-1).view(np.uint8))
        self.unit.const_locs[v] = _Loc(self.mangle(v.name, "w_"), "weight", offset=offset, ctype=v.dtype.c_type)

    def _host_only(self, v: Value) -> bool:
        return v.dtype is dt.STRING   # arrays of pointers to host strings (the context's pool)

    def _random_stream(self, node: Node) -> Optional[int]:
        """None: the generator's state (the run's number, the nodes' calls) lives in the host's
        context, which device code does not see; random ops are refused (the session runs the
        model on the CPU) and a training Dropout fails when it runs."""
        return None

    def _shell(self, kernel: Kernel, data: dict[str, Any], node: Node) -> Optional[Shell]:
        """The family's CUDA shell (``cuda_shells``), where there is one and the node runs on the
        device with work to spread over threads (an empty output runs the C loops, which run no
        iteration)."""
        name = parallel_template(kernel.template)
        empty = any(v.is_tensor and 0 in v.shape for v in node.outputs)
        if name is None or empty or self._on_host(node):
            return None
        return cuda_shells.decide(name[len("cuda/"):-len(".cu.j2")], data)

    def _render_kernel(self, kernel: Kernel, data: dict[str, Any]) -> str:
        if kernel.shell is None:
            return super()._render_kernel(kernel, data)
        return render(parallel_template(kernel.template), data | {"shell": kernel.shell.data()})

    def _bind_inputs(self) -> None:
        super()._bind_inputs()
        if self.is_body:
            return
        for i, v in enumerate(self.entry_inputs):
            if not self._on_device(v):   # sequences, optionals and strings stay in host memory
                continue
            loc = self.locs[v]
            self.steps.append(st.ToDevice(i, loc.var, _ctype(v), self._nbytes_expr(v)))

    def emit_function(self) -> dict[str, Any]:
        body = super().emit_function()
        return {**body, "device_inputs": [s.var for s in self.steps if isinstance(s, st.ToDevice)]}
