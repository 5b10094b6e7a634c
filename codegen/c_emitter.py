"""The C emitter: a typed, optimized IR graph becomes one C translation unit.

It decides where every tensor lives (graph input, inline constant, weights file,
static arena, heap), asks each node's op for its kernel, renders kernels from
templates and assembles the entry point as a list of typed steps (``steps.py``) that
the backend's step macros spell out (``templates/c/steps.j2``).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import onnx.defs

from ..compiler import dtypes as dt
from ..compiler.dims import _FOLD as _DIM_FOLD
from ..compiler.dims import DimDef, num_elements
from ..compiler.errors import OnnxcError, UnsupportedError
from ..compiler.ir import Graph, Node, Value, captured_values, free_values, reads
from ..compiler.ops import _winograd
from ..compiler.ops._cmsis_nn import HELPER as CMSIS_NN_HELPER
from . import abi, cexpr, helper_objects, memory, minifloat
from . import steps as st
from .kernel import Kernel, KernelContext, Target, TensorRef
from .literals import BIT_PATTERN_TYPES, c_bit_patterns, c_literals
from .names import Mangler, c_string, comment
from .templates import render
from .units import split_units
from .uses import DimVar, Reads, Uses, plain
from .work import serial_work

if TYPE_CHECKING:
    from .cuda_shells import Shell

INLINE_CONST_BYTES = 256      # larger constants go to the weights file
PROFILE_MAX_DIMS = 32         # dims a profile event records (inputs' then outputs')
WEIGHT_ALIGN = 64
EMBEDDED_CTX_BYTES = 512      # the context at the start of a freestanding build's arena (checked in C)
RESERVED = frozenset({"ctx", "rc", "inputs", "outputs", "in_shapes", "out_shapes", "weights"})


class Weights:
    """The weights file as constants are placed in it: each constant's bytes (a view of its
    array, not a copy: a language model's weights are hundreds of megabytes) at an offset
    aligned to WEIGHT_ALIGN, zeros between. ``sink``, where given, is handed every piece as it
    is placed, in order (the driver writes the file while the rest of the model is generated),
    and then the pieces are the sink's only."""

    def __init__(self, sink: Optional[Callable[[memoryview], None]] = None) -> None:
        self.pieces: list[memoryview] = []
        self.size = 0
        self.sink = sink

    def place(self, raw: Any) -> int:
        """Appends ``raw`` (bytes-like) at the next aligned offset; returns that offset."""
        pad = (-self.size) % WEIGHT_ALIGN
        if pad:
            self._add(memoryview(bytes(pad)))
        offset = self.size
        self._add(memoryview(raw).cast("B"))
        return offset

    def _add(self, piece: memoryview) -> None:
        self.size += piece.nbytes
        if self.sink is not None:
            # (held by the sink until written, and not here: the constants code generation
            # derives, packed weights and Winograd's filters, are freed as they are written)
            self.sink(piece)
        else:
            self.pieces.append(piece)

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        if self.sink is not None:
            raise RuntimeError("internal: the weights went to their sink as they were placed")
        return b"".join(self.pieces)


@dataclass
class EmitOptions:
    prefix: str = "model"
    command: str = "onnxc"
    version: str = ""
    profile: bool = False         # time every node call into the context's profile buffer
    memory: str = "arena"         # "arena", "no_reuse" (no liveness sharing) or "heap"
    threads: int = 1              # intra-op threads of OpenMP builds
    inter_threads: int = 0        # above 0: independent nodes of one level run on that many threads
    min_threaded_work: int = 0    # threads > 1: below this much work (work.py) the build runs on one
    target: Target = field(default_factory=Target)  # what lowerings specialise for
    # Freestanding C (``onnxc compile --target c``): no allocation, no threads, no I/O; the
    # caller passes the arena and the output buffers, and the weights are typed constant
    # arrays of a source file of their own (``weights_source``) or, with weights_file "bin",
    # the weights file's bytes, which the caller binds at init.
    embedded: bool = False
    weights_file: str = "c"       # embedded builds: "c" (<prefix>_weights.c) or "bin" (<prefix>_weights.bin, bound at init)
    # Embedded builds: symbolic input dims with a largest size (``--dim NAME<=MAX``). Values
    # and scratch whose sizes depend on them get arena room for the bounds, checked at run time.
    dim_bounds: dict[str, int] = field(default_factory=dict)
    # Native builds: node functions over up to this many translation units that compile in
    # parallel, and a big graph's function in a unit of its own (units.py); 0 keeps one unit.
    units: int = 0
    # Native builds: the shared kernel helpers (GEMM, Winograd) declared only, their code in
    # helper units of its own that the compile cache keeps as objects (helper_objects.py).
    helper_objects: bool = False
    # Called with (file name, C) of a helper object's unit as soon as a kernel needs it, so that
    # the object can be built while the rest of the model is generated (driver.py).
    on_shared_helper: Optional[Callable[[str, str], None]] = None
    # Called with each piece of the weights file as it is placed (``Weights``).
    on_weights: Optional[Callable[[memoryview], None]] = None


@dataclass
class CModel:
    """Everything the backend produced for one model."""
    source: str
    header: str
    weights: Weights | bytes     # (views of the constants: a model's weights are not copied again)
    prefix: str
    arena_bytes: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    functions: int
    extra: dict[str, Any] = field(default_factory=dict)
    weights_source: str = ""      # embedded builds: the weights as C arrays (<prefix>_weights.c), "" with a weights.bin
    weights_bytes: int = 0        # embedded builds: the bytes of the weights (those arrays, or weights.bin)
    # The files the library is built from, by name: model.c (the source above) and, where the
    # node functions are split over units that compile in parallel, model_common.h and
    # model_nodes_*.c (codegen/units.py).
    units: dict[str, str] = field(default_factory=dict)
    # System libraries the library links (codegen/system_libraries.py) -> the op that needs it
    libraries: dict[str, str] = field(default_factory=dict)
    # Native builds: the units of the shared helpers the library links as objects, by file name
    # (helpers_<name>.c, helper_objects.py); the model's units only declare what they define.
    helper_units: dict[str, str] = field(default_factory=dict)
    # A split build: the unit that holds only the graph's functions (compiled without optimization,
    # toolchain.GRAPH_OPT); "" when the node functions are in model.c too.
    graph_unit: str = ""


@dataclass
class _Loc:
    """Where a value's bytes live and how the entry function names them."""
    var: str
    kind: str                    # "input" | "inline" | "weight" | "arena" | "heap" | "output"
    offset: int = 0
    output_index: int = -1
    ctype: str = ""
    free: str = "free"           # how the heap copy is released (sequences own their elements)
    slot: str = ""               # a heap value: its slot's name in the function's heap slots


class _Unit:
    """What all functions of one translation unit share: names, constants, weights, helpers."""

    def __init__(self, on_weights: Optional[Callable[[memoryview], None]] = None) -> None:
        self.mangle = Mangler(RESERVED)
        self.const_locs: dict[Value, _Loc] = {}
        self.consts: list[dict[str, Any]] = []
        self.weights = Weights(on_weights)
        self.functions: list[dict[str, Any]] = []
        self.helpers: list[str] = []
        self.libraries: dict[str, str] = {}  # system libraries the helpers call -> the op that needs it
        self.scratch_bytes = 0
        self.referenced: set[str] = set()
        self.uses_sequences = False
        self.profile_nodes: list[dict[str, Any]] = []   # what each profile event id is
        self.external: list[dict[str, Any]] = []   # embedded builds: constants of <prefix>_weights.c
        self.heap_uses: list[str] = []       # what needs memory of a run-time size (not embeddable)
        self.allocating: list[str] = []      # nodes whose kernels call the allocator themselves (Kernel.allocates)
        self.rng_streams = 0                 # random nodes: each counts its calls in the context
        self.notes: list[str] = []           # the kernels' notes, "<node label>: <note>"
        # node functions by (parameters, body): a node whose function would repeat one already
        # written (a transformer's layers, a CNN's repeated blocks) calls that one instead
        self.bodies: dict[tuple, dict[str, Any]] = {}


def helper_data(opt: EmitOptions, used_types: set) -> dict[str, Any]:
    """What helper templates see; ``embedded``: portable C only (no intrinsics, no _Float16)."""
    return {**minifloat.helper_data(used_types), **abi.helper_data(), "winograd": _winograd.helper_data(),
            "embedded": opt.embedded, "declare_only": False, "bf16_gemm": opt.target.precision == "bf16"}


def _helper_unit_data(opt: EmitOptions, used_types: set) -> dict[str, Any]:
    """The data of the helper objects' units (helper_objects.helper_units)."""
    threads = max(int(opt.threads), 1)
    return {**helper_data(opt, used_types), "version": comment(opt.version), "threads": threads,
            "pool_threads": max(threads, int(opt.inter_threads), 1), "serial_model": False}


def gemm_helper_unit(opt: EmitOptions) -> dict[str, str]:
    """The GEMM helper object's unit as a build with these options and no 8-bit float types
    makes it (file name -> C): built while the model is still being loaded and optimized
    (driver.py), it is in the compile cache by the time the model's units need it."""
    return helper_objects.helper_units(["c/helpers/gemm.c.j2"], _helper_unit_data(opt, set()))


class CEmitter:
    """Emits one graph as a function of steps: the model's entry point, or (for a
    control-flow body) a static function with the same calling convention."""
    template_dir = "c"
    source_template = "c/model.c.j2"
    step_template = "c/steps.j2"       # the macros that render each kind of step
    LOCAL_DIMS = True   # node functions name their dims (_node_dim); a CUDA launch names the graph's

    def __init__(self, graph: Graph, options: EmitOptions, unit: _Unit | None = None,
                 entry_inputs: list[Value] | None = None, outer_ready: frozenset = frozenset(),
                 is_body: bool = False, scope: str = "") -> None:
        self.g = graph
        self.opt = options
        self.unit = unit or _Unit(options.on_weights)
        self.mangle = self.unit.mangle
        self.locs: dict[Value, _Loc] = {}
        self.steps: list[st.Step] = []
        self.heap_scratch: list[dict[str, str]] = []   # node scratch of a run-time size: heap slots too
        self._dims_ready: set[str] = set()
        # A body's inputs are its formal inputs, then the enclosing values it reads; dims of
        # enclosing graphs it needs but cannot bind from those come after their shapes.
        self.entry_inputs = list(graph.inputs) if entry_inputs is None else entry_inputs
        self.outer_ready = outer_ready
        self.outer_dims: list[str] = []
        self._scratch_base = 0       # where a node's static scratch starts (nodes running together differ)
        self._scratch_end = 0
        self.is_body = is_body
        self.scope = scope          # prefix of this function's node function names
        self._input_dims = 0

    # --- names ----------------------------------------------------------
    def dim_var(self, sym: str) -> str:
        return self.mangle(sym, "dim_")

    def dim(self, d) -> cexpr.CExpr:
        return d if isinstance(d, int) else self.dim_var(d)

    # --- entry ----------------------------------------------------------
    def _one_thread(self) -> Optional[str]:
        """Why a multi-threaded build of a model too small to split (work.py) has no pool and
        no kernel's loop over the thresholds; None for any other build."""
        if self.is_body or self.opt.threads <= 1 or self.opt.inter_threads > 0 or self.opt.embedded:
            return None
        work = serial_work(self.g, self.opt.min_threaded_work)
        if work is None:
            return None
        return (f"{work / 1e6:.1f}M multiply-adds and elements a run, under {self.opt.min_threaded_work / 1e6:.1f}M: "
                "every node runs on the calling thread")

    def emit(self) -> CModel:
        g = self.g
        one_thread = self._one_thread()
        if one_thread is not None:
            # The kernels planned as in a 1-thread build (Winograd's blocks, the recurrences'
            # steps, scratch), not for threads that never run.
            self.opt = replace(self.opt, target=replace(self.opt.target, threads=1))
        body = self.emit_function()
        unit = self.unit
        consts = [c for c in unit.consts if c["var"] in unit.referenced]
        used_types = {v.dtype for v in g.values()}
        helpers = list(unit.helpers)
        if unit.uses_sequences:
            helpers.insert(0, "c/helpers/sequence.c.j2")
        if any(v.kind == "map" for v in g.inputs):
            helpers.insert(0, "c/helpers/map.c.j2")
        if used_types & set(dt.MINIFLOATS):
            helpers.insert(0, "c/helpers/minifloat.c.j2")
        helper_data = self._helper_data(used_types)
        shared = helper_objects.SHARED if self.opt.helper_objects else {}
        if one_thread is not None:
            unit.notes.append(f"model: {one_thread}")
        data = {
            "banner": {"command": comment(self.opt.command), "version": comment(self.opt.version),
                       "graph": comment(g.name)},
            "prefix": self.opt.prefix,
            "consts": consts,
            "helpers": [render(h, {**helper_data, "declare_only": h in shared}) for h in helpers],
            "helper_objects": bool(shared),
            "functions": unit.functions,
            "run": body,
            "arena_planned": memory.aligned(body["arena"]),
            "arena_bytes": memory.aligned(body["arena"]) + unit.scratch_bytes,
            "arena_align": memory.ALIGN,
            "num_inputs": len(g.inputs),
            "num_outputs": len(g.outputs),
            "uses_sequences": unit.uses_sequences,
            "profile": self.opt.profile,
            "threads": max(int(self.opt.threads), 1),
            # the most threads a region asks for: intra-op loops, or the nodes of an inter-op step
            "pool_threads": max(int(self.opt.threads), int(self.opt.inter_threads), 1),
            "serial_model": one_thread is not None,
            "profile_max_dims": PROFILE_MAX_DIMS,
            "rng_streams": unit.rng_streams,
            "embedded": False,
            "step_template": self.step_template,
            "split": False,
        }
        inputs = [self._io_info(v, v.name) for v in g.inputs]
        outputs = [self._io_info(v, n) for v, n in zip(g.outputs, g.output_names)]
        functions = sum(1 for f in unit.functions if f["kind"] == "node")
        if self.opt.embedded:
            return self._emit_embedded(data, inputs, outputs, functions)
        parts = split_units(unit.functions, self.opt.units, len(g.nodes)) if self.opt.units > 0 else []
        units: dict[str, str] = {}
        if parts:
            data["split"] = True
            units["model_common.h"] = render("c/model_common.h.j2", data)
            for k, part in enumerate(parts, 1):
                units[f"model_nodes_{k}.c"] = render("c/model_nodes.c.j2", {
                    "banner": data["banner"], "part": k, "parts": len(parts), "functions": part,
                    "families": list(dict.fromkeys(f["family"].removesuffix(".c.j2").split("/")[-1] for f in part))})
        source = render(self.source_template, self._template_data(data))
        units = {"model.c": source, **units}
        header = render("c/model.h.j2", {"prefix": self.opt.prefix, "banner": data["banner"],
                                         **abi.header_data(self.opt.prefix, self._abi_features())})
        extra: dict[str, Any] = {"random": True} if unit.rng_streams else {}
        if one_thread is not None:
            extra["one_thread"] = one_thread
        if self.opt.profile:
            extra |= {"profile_nodes": unit.profile_nodes, "profile_max_dims": PROFILE_MAX_DIMS}
        helper_units = helper_objects.helper_units(helpers, _helper_unit_data(self.opt, used_types)) \
            if shared else {}
        return CModel(source, header, unit.weights, self.opt.prefix, data["arena_bytes"],
                      inputs, outputs, functions, extra, units=units, libraries=dict(unit.libraries),
                      helper_units=helper_units, graph_unit="model.c" if parts else "")

    def _emit_embedded(self, data: dict[str, Any], inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                       functions: int) -> CModel:
        """The freestanding translation unit, its header and weights.c; refuses (UnsupportedError,
        naming the node) what needs memory of a run-time size, sequences or strings."""
        g, unit = self.g, self.unit
        problems = list(dict.fromkeys(unit.heap_uses))
        if unit.uses_sequences:
            problems.append("sequence, map or optional values")
        strings = sorted({v.name for v in g.values() if v.dtype is dt.STRING})
        if strings:
            problems.append(f"string tensors ({', '.join(repr(n) for n in strings[:3])})")
        halves = sorted({v.name for v in g.values() if v.dtype is dt.FLOAT16})
        if halves:
            problems.append(f"float16 tensors, which C99 has no type for ({', '.join(repr(n) for n in halves[:3])})")
        unknown = sorted(set(self.opt.dim_bounds) - {d for v in g.inputs if v.is_tensor for d in v.shape
                                                      if isinstance(d, str)})
        if unknown:
            raise UnsupportedError(f"--dim {unknown[0]}<=MAX: the model has no symbolic input dim of that name")
        for v, info in zip([*g.inputs, *g.outputs], [*inputs, *outputs]):
            symbols = [] if not v.is_tensor else [d for d in v.shape if self.dim_bound(d) is None]
            fixable = [d for d in symbols if g.dims.defs[d].kind == "input"]
            if fixable:
                problems.append(f"{info['name']!r} has the symbolic dim {fixable[0]!r}: fix it with "
                                f"--dim {fixable[0]}=SIZE or bound it with --dim {fixable[0]}<=MAX")
            elif symbols or not v.is_tensor:
                node = v.producer
                where = f" of {node.op_type} {node.name!r}" if node is not None else ""
                problems.append(f"the size of {info['name']!r}{where} is known only at run time")
        if problems:
            raise UnsupportedError("the model cannot be compiled for --target c (no allocation at run time): "
                                   + "; ".join(problems[:8]) + (" ..." if len(problems) > 8 else ""))

        def io(v: Value, info: dict[str, Any]) -> dict[str, Any]:
            dims = [self.dim_bound(d) for d in v.shape]    # (the bounds of bounded dims)
            shape = ", ".join(str(d) if isinstance(d, int) else f"{d}<={b}" for d, b in zip(v.shape, dims))
            return {"name": c_string(info["name"]), "comment": comment(f"{info['name']}, {v.dtype.name}[{shape}]"),
                    "ctype": v.dtype.c_type, "dtype": v.dtype.name, "dims": dims, "count": num_elements(dims),
                    "bytes": num_elements(dims) * v.dtype.itemsize}

        # Bounded dims: their sizes come at run time, in the order of --dim's names.
        bounded, macro_names = [], set()
        for i, (sym, most) in enumerate(sorted(self.opt.dim_bounds.items())):
            positions, pos = [], 0
            for v in g.inputs:
                for d in v.shape:
                    if d == sym:
                        positions.append(pos)
                    pos += 1
            macro = re.sub(r"[^A-Za-z0-9_]", "_", sym).upper()[:32]
            if not macro or macro in macro_names or not re.match(r"[A-Z_]", macro):
                macro = f"{i}"
            macro_names.add(macro)
            bounded.append({"name": c_string(sym), "comment": comment(sym), "macro": macro, "max": most,
                            "positions": positions})

        prefix = self.opt.prefix
        ins = [io(v, info) for v, info in zip(g.inputs, inputs)]
        outs = [io(v, info) for v, info in zip(g.outputs, outputs)]
        externals = [e for e in unit.external if e["var"] in unit.referenced]   # (as consts are)
        weights_bin = self.opt.weights_file == "bin"
        rng_bytes = -(-8 * (4 + unit.rng_streams) // 64) * 64 if unit.rng_streams else 0   # the generator's state
        ctx_bytes = EMBEDDED_CTX_BYTES + rng_bytes
        weights_bytes = len(unit.weights) if weights_bin else sum(e["bytes"] for e in externals)
        data = {**data, "embedded": True, "inputs": ins, "outputs": outs, "externals": externals,
                "weights_bytes": weights_bytes, "ctx_bytes": ctx_bytes, "weights_bin": weights_bin,
                "input_dims": [d for t in ins for d in t["dims"]], "output_dims": [d for t in outs for d in t["dims"]],
                "bounded": bounded}
        banner = data["banner"]
        source = render(f"{self.template_dir}/model.c.j2", data)
        header = render(f"{self.template_dir}/embedded/model.h.j2",
                        {"prefix": prefix, "PREFIX": prefix.upper(), "banner": banner, "inputs": ins, "outputs": outs,
                         "arena_bytes": ctx_bytes + data["arena_bytes"], "weights_bytes": weights_bytes,
                         "weights_bin": weights_bin, "bounded": bounded, "random": bool(unit.rng_streams)})
        weights = "" if weights_bin else render(f"{self.template_dir}/embedded/weights.c.j2",
                                                {"prefix": prefix, "PREFIX": prefix.upper(), "banner": banner,
                                                 "externals": externals})
        if unit.allocating:   # each such kernel also needs memory of a run-time size, refused above
            raise OnnxcError(f"internal: freestanding source allocates memory ({unit.allocating[0]})")
        return CModel(source, header, bytes(unit.weights) if weights_bin else b"", prefix,
                      ctx_bytes + data["arena_bytes"], inputs, outputs,
                      functions, {"inputs": ins, "outputs": outs, "notes": unit.notes,
                                                  "cmsis_nn": CMSIS_NN_HELPER in unit.helpers}, weights_source=weights,
                      weights_bytes=weights_bytes)

    def emit_function(self) -> dict[str, Any]:
        """Steps of this graph's function; static intermediates share an arena by liveness.

        Only the entry point plans an arena: a body runs inside a node of its parent while
        the parent's intermediates are live, so its intermediates live on the heap.
        """
        g = self.g
        is_body = self.is_body
        if any(not v.is_tensor for v in g.values()):
            self.unit.uses_sequences = True
        self._bind_inputs()
        parallel = self.opt.inter_threads > 0 and not is_body and not self.opt.profile
        # Time for liveness: a node's place, or its level when a level's nodes run together.
        when = _levels(g) if parallel else {n: i for i, n in enumerate(g.nodes)}
        last_use = self._last_uses(when)
        outputs_of = self._output_slots()
        static_buffers: list[memory.Buffer[Value]] = []
        for node in g.nodes:
            step_index = when[node]
            for out in node.outputs:
                if out.const is not None:
                    self._place_const(out)
                elif out in outputs_of:
                    self.locs[out] = _Loc(self.mangle(out.name, "t_"), "output", output_index=outputs_of[out][0])
                elif self._host_only(out) and not is_body:
                    self.locs[out] = self._heap_loc(out, "onnxc_host_free")
                elif (out.static or self._bounded_bytes(out) is not None) and not is_body \
                        and not node.impl.allocates_outputs and self.opt.memory != "heap":
                    self.locs[out] = _Loc(self.mangle(out.name, "t_"), "arena")
                    size = self._nbytes_static(out) if out.static else self._bounded_bytes(out)
                    static_buffers.append(memory.Buffer(out, size, step_index, last_use.get(out, step_index)))
                else:
                    self.locs[out] = self._heap_loc(out, _free_fn(out))
        reuse = self.opt.memory != "no_reuse"
        views = self._views(static_buffers) if reuse and not parallel else {}
        shares = self._in_place(static_buffers, when, last_use, views) if reuse and not parallel else {}
        offsets, arena = memory.plan(static_buffers, reuse=reuse, shares=shares, views=views)
        for key, off in offsets.items():
            self.locs[key].offset = off

        index = {n: i for i, n in enumerate(g.nodes)}
        groups: dict[int, list[Node]] = {}
        for node in g.nodes:
            if not all(o.const is not None for o in node.outputs):
                groups.setdefault(when[node], []).append(node)
        for time in sorted(groups):
            nodes = groups[time]
            start = len(self.steps)
            self._scratch_base = 0
            for node in nodes:
                self._emit_node(index[node], node)
                if len(nodes) > 1:
                    self._scratch_base = self._scratch_end  # the next one may run at the same time
            self._scratch_base = 0
            if len(nodes) > 1:
                self._run_together(start, len(nodes))
            for node in nodes:
                for v in reads(node):
                    loc = self.locs.get(v)
                    if last_use.get(v) == time and loc is not None and loc.kind == "heap":
                        self.steps.append(st.Free(loc.var, loc.free, loc.slot))
        for i, v in enumerate(g.outputs):
            self._emit_output(i, v)

        calls: list[st.Call | st.HostCall] = [s for s in self.steps if isinstance(s, (st.Call, st.HostCall))]
        calls += [c for s in self.steps if isinstance(s, st.Parallel) for c in s.calls]
        referenced = {a for call in calls for a in call.args} | \
            {s.src for s in self.steps if isinstance(s, st.CopyOutput)}
        self.unit.referenced |= referenced
        weight_refs = [{"var": loc.var, "ctype": loc.ctype, "offset": loc.offset}
                       for loc in self.unit.const_locs.values() if loc.kind == "weight" and loc.var in referenced]
        return {"steps": self.steps,
                "heap_vars": [{"var": loc.var, "free": loc.free, "slot": loc.slot}
                              for loc in self.locs.values() if loc.kind == "heap"] + self.heap_scratch,
                "output_vars": [{"var": self._output_var(i), "free": _free_fn(v)} for i, v in enumerate(g.outputs)],
                "weight_refs": weight_refs, "arena": arena, "entry": not self.is_body}

    def _io_info(self, v: Value, name: str) -> dict[str, Any]:
        """Dims: ints, symbol names (the model's, or made up for unnamed ones), None for derived dims."""
        if v.kind == "map_sequence":  # ZipMap: [N, C] values, keys from its labels
            keys = v.producer.impl.keys(v.producer)
            return {"name": name, "dtype": v.dtype.name, "shape": [None, len(keys)], "kind": v.kind,
                    "keys": keys, "key_type": "string" if keys and isinstance(keys[0], str) else "int64"}
        if v.kind == "map":
            return {"name": name, "dtype": v.dtype.name, "key_dtype": v.key_dtype.name, "shape": None, "kind": "map"}
        if not v.is_tensor:  # containers: element dims are not fixed
            shape = None if v.shape is None else [d if isinstance(d, int) else None for d in v.shape]
            return {"name": name, "dtype": v.dtype.name, "shape": shape, "kind": v.kind}
        shape = [d if isinstance(d, int) or self.g.dims.defs[d].kind == "input" else None for d in v.shape]
        info = {"name": name, "dtype": v.dtype.name, "shape": shape, "kind": "tensor"}
        # get_inputs()/get_outputs() report a dim the model leaves unnamed as None (as onnxruntime);
        # "shape" keeps the name onnxc gave it, which the CLI's --dim and the run-time checks use
        shown = [None if isinstance(d, str) and not self.g.dims.defs[d].named else d for d in shape]
        return info if shown == shape else {**info, "shown_shape": shown}

    def _helper_data(self, used_types: set) -> dict[str, Any]:
        return helper_data(self.opt, used_types)

    def _abi_features(self) -> set[str]:
        """What decides the functions and structs the library exports (``abi.Function.needs``)."""
        features = {"random"} if self.unit.rng_streams else set()
        if self.unit.uses_sequences:
            features.add("sequences")
        if any(v.kind == "map" for v in self.g.inputs):
            features.add("maps")
        return features

    def _template_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """The translation unit's template data (a backend adds its own)."""
        return data

    # --- inputs and dims --------------------------------------------------
    def _bind_inputs(self) -> None:
        pos = 0
        for i, v in enumerate(self.entry_inputs):
            var = self.mangle(v.name, "in_")
            self.locs[v] = _Loc(var, "input")
            self.steps.append(st.Input(var, _ctype(v), i))
            for axis, d in enumerate(v.shape if v.is_tensor else ()):
                where = c_string(f"input '{v.name}' axis {axis}")
                if isinstance(d, int):
                    self.steps.append(st.CheckDim(pos, cexpr.lit(d), where))
                elif d in self._dims_ready:
                    self.steps.append(st.CheckDim(pos, self.dim_var(d), where))
                else:
                    self.steps.append(st.BindDim(pos, self.dim_var(d), where))
                    self._dims_ready.add(d)
                pos += 1
        self._input_dims = pos

    def _require_dims(self, shape) -> None:
        for d in shape:
            if isinstance(d, str):
                self._require_dim(d)

    def _require_dim(self, sym: str) -> None:
        if sym in self._dims_ready:
            return
        if sym in self.outer_ready:
            # Known to the enclosing function: passed after the input shapes.
            self.steps.append(st.BindDim(self._input_dims + len(self.outer_dims), self.dim_var(sym),
                                         c_string(f"dim {sym} of the enclosing graph")))
            self.outer_dims.append(sym)
            self._dims_ready.add(sym)
            return
        d: DimDef = self.g.dims.defs[sym]
        if d.kind != "expr":
            raise OnnxcError(f"internal: symbol {sym!r} ({d.kind}) used before it is computed")
        for arg in d.args:
            if isinstance(arg, str):
                self._require_dim(arg)
        a, b = (cexpr.lit(self.dim(x)) for x in d.args)
        x, y = d.args
        what = {"same": f"dims {x} and {y} must be equal", "bcast": f"dims {x} and {y} cannot broadcast"}.get(
            d.op, f"dim {sym} = {d.op}({x}, {y}) is negative")
        self.steps.append(st.Dim(self.dim_var(sym), d.op, a, b, c_string(what)))
        self._dims_ready.add(sym)

    # --- constants ------------------------------------------------------------
    def _loc(self, v: Value) -> _Loc:
        loc = self.locs.get(v)
        if loc is None and v not in self.unit.const_locs and v.const is not None:
            self._place_const(v)   # constants are placed when first passed: unused ones cost nothing
        return loc if loc is not None else self.unit.const_locs[v]

    def _place_const(self, v: Value) -> None:
        if v in self.unit.const_locs:
            return
        array = np.asarray(v.const, order="C")
        # (its bytes as a view, not a copy: a language model's weights are hundreds of megabytes;
        # strings are pointers, always inline)
        raw = array.reshape(-1).view(np.uint8) if v.dtype is not dt.STRING else b""
        weights = self.unit.weights
        if self.opt.embedded and self.opt.weights_file == "c" and len(raw) > INLINE_CONST_BYTES:
            # a typed array of <prefix>_weights.c, under the model's prefix (two models link together)
            var = self.mangle(v.name, f"{self.opt.prefix}_w_")
            self.unit.const_locs[v] = _Loc(var, "inline")
            bits, literals = c_bit_patterns(array, v.dtype) if v.dtype in BIT_PATTERN_TYPES else \
                (None, c_literals(array, v.dtype))
            self.unit.external.append({"var": var, "ctype": v.dtype.c_type, "count": max(array.size, 1),
                                       "bits": bits, "literals": literals or ["0"], "bytes": len(raw),
                                       "comment": comment(f"{v.name}: {v.type_str()}")})
            return
        if len(raw) > INLINE_CONST_BYTES:
            offset = weights.place(raw)
            self.unit.const_locs[v] = _Loc(self.mangle(v.name, "w_"), "weight", offset=offset,
                                               ctype=v.dtype.c_type)
        else:
            var = self.mangle(v.name, "c_")
            self.unit.const_locs[v] = _Loc(var, "inline")
            self.unit.consts.append({"var": var, "ctype": v.dtype.c_type, "count": max(array.size, 1),
                                "literals": c_literals(array, v.dtype) or ["0"],
                                "comment": comment(f"{v.name}: {v.type_str()}")})

    # --- nodes ----------------------------------------------------------------
    def _tensor_ref(self, name: str, v: Value, uses: Uses, local: Optional[dict[str, str]] = None) -> TensorRef:
        """``v`` as parameter ``name`` of a node function whose text records what it names in
        ``uses`` (its dims by their names in the function: ``_node_dim``)."""
        if not v.is_tensor:  # a container: its elements' dims live in it at run time
            return TensorRef(uses.tensor(name), v.dtype, v.shape, [], None, v.kind, v.key_dtype)
        return TensorRef(uses.tensor(name), v.dtype, tuple(v.shape),
                         [self._node_dim(d, uses, local) for d in v.shape], v.const)

    def _node_dim(self, d, uses: Uses, local: Optional[dict[str, str]] = None) -> cexpr.CExpr:
        """Dim ``d`` as a node function's text names it (recorded in ``uses`` when written).

        ``local`` (the graph's dim variable -> the function's parameter): a dim the model names
        (an input's ``dim_param``) keeps its name, any other is the function's ``dim_1``,
        ``dim_2``... in the order the node first names them. Nodes that compute the same at
        sizes of the same form then have the same text and share one function (``_Unit.bodies``)
        where the graph made up different symbols for them (each layer of a transformer's export
        has its own)."""
        if isinstance(d, int):
            return d
        var = self.dim_var(d)
        if local is None:
            return uses.dim(var)
        name = local.get(var)
        if name is None:
            taken = set(local.values())
            definition = self.g.dims.defs.get(d)
            if definition is not None and definition.kind == "input" and definition.named and var not in taken:
                name = var
            else:
                n = len(local) + 1
                while f"dim_{n}" in taken:
                    n += 1
                name = f"dim_{n}"
            local[var] = name
        return uses.dim(name)

    def _require_value_dims(self, v: Value) -> None:
        if v.is_tensor:
            self._require_dims(v.shape)

    def _emit_node(self, index: int, node: Node, local_dims: bool = True) -> None:
        params = Mangler(RESERVED)
        uses = Uses()
        in_names, out_names = _spec_names(node)
        data_syms = [s for s in _output_syms(node) if self.g.dims.defs[s].kind == "data"
                     and s not in self._dims_ready]
        # (a node that computes dims from data, or allocates its outputs, names the graph's)
        local: Optional[dict[str, str]] = {} if self.LOCAL_DIMS and local_dims and not data_syms \
            and not node.impl.allocates_outputs else None
        inputs = [None if v is None else self._tensor_ref(params(in_names[i], ""), v, uses, local)
                  for i, v in enumerate(node.inputs)]
        outputs = [self._tensor_ref(params(out_names[i], ""), v, uses, local) for i, v in enumerate(node.outputs)]
        data_params = [f"out_{self.dim_var(s)}" for s in data_syms]  # see KernelContext.data_dim_ptr
        captures = [(self._tensor_ref(params(v.name, "cap_"), v, uses, local), v) for v in captured_values(node)]
        for v in node.inputs:
            if v is not None:
                self._require_value_dims(v)
        for _, v in captures:
            self._require_value_dims(v)
        k = KernelContext(node, inputs, outputs, lambda d: self._node_dim(d, uses, local), data_params,
                          self.opt.target, uses)
        k.captures = {v: t for t, v in captures}
        k.emit_body = lambda attr: self._emit_body(node, attr, k)
        k.new_random_stream = lambda: self._random_stream(node)
        try:
            kernel: Kernel = node.impl.lower(node, k)
        except OnnxcError:
            raise
        except NotImplementedError as e:
            raise UnsupportedError(f"{node.label}: {e}") from e
        if local and kernel.scratch:
            # scratch is sized where the graph calls the node: in the graph's dim variables
            graph_dims = {name: DimVar(var) for var, name in local.items()}
            sizes = {name: cexpr.rename(size, graph_dims) for name, size in kernel.scratch.items()}
            if any(size is None for size in sizes.values()):   # (text that names dims: lowered again)
                return self._emit_node(index, node, local_dims=False)
            kernel = replace(kernel, scratch=sizes)
        fname = self.mangle(node.name or node.op_type, f"{self.scope}node{index}_{node.op_type}_")
        label = comment(f"{node.domain + '::' if node.domain else ''}{node.op_type} '{node.name}'"
                        + (f" = {node.memo['fused']}" if "fused" in node.memo else ""))
        types = comment(", ".join(v.type_str() if v is not None else "_" for v in node.inputs)
                        + " -> " + ", ".join(v.type_str() for v in node.outputs))

        self._require_dims(node.dim_checks)  # equalities the op's inference assumed
        tensor_args = [(t, v) for t, v in zip(inputs, node.inputs) if t is not None] + captures
        self_alloc = node.impl.allocates_outputs

        if data_syms and not self_alloc:
            if kernel.shape_template is None:
                raise OnnxcError(f"internal: {node.label} has data-dependent dims but no shape template")
            # Its parameters: what its template writes (text the lowering formatted goes to the node function).
            with uses.into(Reads()) as shape_reads:
                body = render(kernel.shape_template, _common(k) | kernel.shape_data)
            dims = sorted(shape_reads.dims)
            used = [(t, v) for t, v in tensor_args if t.name in shape_reads.tensors]
            fparams = [("onnxc_ctx *", "ctx")] + [("int64_t", d) for d in dims] \
                + [(f"const {t.ctype} *restrict", t.name) for t, _ in used] \
                + [("int64_t *restrict", p) for p in data_params]
            self.unit.functions.append({"kind": "node", "name": fname + "_shape", "comment": label + " (output shape)",
                                        "types": types, "body": body, "host": True, "family": "shape",
                                        **_parameters(fparams)})
            for s in data_syms:
                self.steps.append(st.DeclareDim(self.dim_var(s)))
            args = ["ctx"] + dims + [self._loc(v).var for _, v in used] \
                + ["&" + self.dim_var(s) for s in data_syms]
            # (a CUDA build runs it on the host, on host copies of the tensors it reads)
            # (containers live on the host in every build: only tensors are staged)
            stage = [st.Staged(self._nbytes_expr(v), t.ctype, self._loc(v).var) for t, v in used if self._on_device(v)]
            staged = iter(range(len(stage)))
            host_args = ["ctx"] + dims \
                + [f"(const {t.ctype} *)staged{next(staged)}" if self._on_device(v) else self._loc(v).var
                   for t, v in used] \
                + ["&" + self.dim_var(s) for s in data_syms]
            self.steps.append(st.HostCall(fname + "_shape", args, label, "computes output dims from data on the host",
                                          host_args, stage))
            self._dims_ready.update(data_syms)

        if self_alloc:
            self.unit.heap_uses.append(f"{node.op_type} {node.name!r}: allocates its outputs at run time")
            # The kernel allocates its outputs (control flow): it gets where to store the
            # pointers and the dims it computes.
            for s in data_syms:
                self.steps.append(st.DeclareDim(self.dim_var(s)))
            self._dims_ready.update(data_syms)
        for v in node.outputs:
            if self_alloc:
                break
            self._require_value_dims(v)
            loc = self.locs[v]
            if loc.kind == "heap":
                self.unit.heap_uses.append(f"{node.op_type} {node.name!r}: output {v.name!r} has a size known only "
                                           "at run time")
            if loc.kind in ("heap", "output"):
                self.steps.append(st.Alloc(loc.var, v.dtype.c_type, self._nbytes_expr(v), heap=loc.kind == "heap",
                                           output=loc.output_index, host=self._host_only(v), slot=loc.slot))
            elif loc.kind == "arena":
                room = None if v.static else self._bounded_bytes(v)   # dims with bounds: the size must fit
                check = None if room is None else st.ArenaCheck(self._nbytes_expr(v), room)
                self.steps.append(st.Arena(loc.var, v.dtype.c_type, loc.offset, check))

        for pname, array in kernel.constants.items():
            v = Value(self.g.unique_name(f"{node.name or node.op_type}_{pname}"), dt.from_numpy(array.dtype),
                      tuple(array.shape), array)
            tensor_args.append((self._tensor_ref(pname, v, uses), v))
            self._place_const(v)
            if self.unit.weights.sink is not None and self.unit.const_locs[v].kind == "weight":
                v.const = None   # (written from the view the sink holds; then freed)
        for helper in kernel.helpers:
            if helper not in self.unit.helpers:
                self.unit.helpers.append(helper)
                if self.opt.helper_objects and self.opt.on_shared_helper and helper in helper_objects.SHARED:
                    # (the unit emit() makes for it: the helpers' data depends on the graph's types only)
                    for name, text in helper_objects.helper_units(
                            [helper], _helper_unit_data(self.opt, {v.dtype for v in self.g.values()})).items():
                        self.opt.on_shared_helper(name, text)
        for library in kernel.libraries:
            self.unit.libraries.setdefault(library, node.op_type)
        if kernel.allocates:
            self.unit.allocating.append(node.label)
        scratch = [(params(name, "scratch_"), size) for name, size in kernel.scratch.items()]
        data = _common(k) | kernel.data | {"scratch": [s for s, _ in scratch]}
        with uses.into(Reads()):   # (a launch is written where the kernel is launched, not in its body)
            kernel = replace(kernel, shell=self._shell(kernel, data, node))
        if kernel.shell is not None:   # no parameter, and no arena room, for the scratch its shell drops
            scratch = [(s, size) for s, size in scratch if s not in kernel.shell.drops]
        with uses.into(Reads()) as reads:
            body = self._render_kernel(kernel, data)
        launch = kernel.shell.launch if kernel.shell is not None else None
        reads |= uses.lowered   # what the template wrote, and the text the lowering formatted
        dims = sorted(reads.dims)
        used = [(t, v) for t, v in tensor_args if t.name in reads.tensors]
        if kernel.note:
            body = f"    /* {comment(kernel.note)} */\n" + body
            self.unit.notes.append(f"{label}: {kernel.note}")
        for t in outputs:
            if t.name not in reads.tensors:
                body = f"    (void){plain(t.name)};\n" + body
        if self_alloc:
            out_params = [("void **restrict", t.name) for t in outputs] + [("int64_t *restrict", p) for p in data_params]
            dims = [d for d in dims if f"out_{d}" not in data_params]
        else:
            out_params = [(f"{t.ctype} *restrict", t.name) for t in outputs]
        fparams = [("onnxc_ctx *", "ctx")] + [("int64_t", d) for d in dims] \
            + [(f"const {t.ctype} *restrict", t.name) for t, _ in used] \
            + out_params + [("void *restrict", s) for s, _ in scratch]
        function = {"kind": "node", "name": fname, "comment": label, "types": types, "body": body, "launch": launch,
                    "family": kernel.template, "same": [], **_parameters(fparams)}
        # (a launched kernel's launcher is the node's own: only plain functions are shared)
        key = (tuple(fparams), body) if launch is None else None
        shared = self.unit.bodies.get(key) if key is not None else None
        if shared is None:
            self.unit.functions.append(function)
            if key is not None:
                self.unit.bodies[key] = function
        else:
            shared["same"].append(label)
        scratch_vars, heap_scratch, offset = [], [], self._scratch_base
        for s, size in scratch:
            var = f"{fname}_{s}"
            scratch_vars.append(var)
            room = size if isinstance(size, int) else self._bounded_scratch(size)
            if room is not None:  # static scratch: the region after the planned arena, reused by every node
                check = None if isinstance(size, int) else st.ArenaCheck(cexpr.lit(size), room)
                self.steps.append(st.Arena(var, "uint8_t", f"ARENA_PLANNED + {offset}", check))
                offset += memory.aligned(room)
            else:
                self.unit.heap_uses.append(f"{node.op_type} {node.name!r}: needs scratch memory of a run-time size")
                slot = self.mangle.derived(var, "_mem")
                heap_scratch.append((var, slot))
                self.heap_scratch.append({"var": var, "free": "free", "slot": slot})
                self.steps.append(st.Alloc(var, "uint8_t", cexpr.lit(size), heap=True, output=-1, scratch=True,
                                           slot=slot))
        self.unit.scratch_bytes = max(self.unit.scratch_bytes, offset)
        self._scratch_end = offset
        if self_alloc:
            out_args = [f"&{self._slot(v)}" for v in node.outputs] + ["&" + self.dim_var(s) for s in data_syms]
        else:
            out_args = [self._loc(v).var for v in node.outputs]
        graph_dim = {name: var for var, name in (local or {}).items()}   # (a parameter -> what the call passes)
        args = ["ctx"] + [graph_dim.get(d, d) for d in dims] + [self._loc(v).var for _, v in used] + out_args \
            + scratch_vars
        prof = len(self.unit.profile_nodes) if self.opt.profile else None
        # the tensors it reads, by their place in args (a backend may stage them elsewhere)
        reads = [st.Read(1 + len(dims) + j, self._nbytes_expr(v), t.ctype)
                 for j, (t, v) in enumerate(used) if self._on_device(v)]
        call = st.Call(fname if shared is None else shared["name"], args, label, prof, launch, reads, bool(scratch_vars))
        self.steps.append(self._node_call(node, call))
        for v in node.outputs if self_alloc else ():
            self._require_value_dims(v)
            self.steps.append(st.Adopt(self._loc(v).var, _ctype(v), self._slot(v),
                                       self._nbytes_expr(v) if self._on_device(v) else None))
        if prof is not None:
            self._profile_step(prof, node)
        for var, slot in heap_scratch:
            self.steps.append(st.Free(var, "free", slot))

    def _node_call(self, node: Node, call: st.Call) -> st.Step:
        """The step that runs ``node``'s function (a backend may run it elsewhere)."""
        return call

    def _host_only(self, v: Value) -> bool:
        """Whether ``v`` lives in host memory in a build whose tensors do not (the CUDA build's
        string tensors): never in the arena, never staged."""
        return False

    def _on_device(self, v: Value) -> bool:
        """A tensor in the build's device memory (every tensor but ``_host_only`` ones; never a
        sequence or optional): what a node run on the host reads from copies."""
        return v.is_tensor and not self._host_only(v)

    def _shell(self, kernel: Kernel, data: dict[str, Any], node: Node) -> Optional[Shell]:
        """How a backend's loop shell of the kernel's family runs ``node`` (``Kernel.shell``); the
        C build runs the family's C template."""
        return None

    def _render_kernel(self, kernel: Kernel, data: dict[str, Any]) -> str:
        """A node's function body from its kernel family template (a backend renders its shell's
        template where ``kernel.shell`` says one runs the node)."""
        return render(kernel.template, data)

    def _random_stream(self, node: Node) -> int:
        """A new slot of the context's per-node call counts (c/helpers/random.c.j2)."""
        self.unit.rng_streams += 1
        return self.unit.rng_streams - 1

    def _profile_step(self, prof: int, node: Node) -> None:
        """After the node ran: its time and the dims of its tensors, for the profile's shapes."""
        def info(v: Value) -> dict[str, Any]:
            return {"dtype": v.dtype.name, "rank": len(v.shape) if v.is_tensor else -1}
        tensors = [v for v in list(node.inputs) + list(node.outputs) if v is not None and v.is_tensor]
        dims = [cexpr.lit(self.dim(d)) for v in tensors for d in v.shape][:PROFILE_MAX_DIMS]
        self.unit.profile_nodes.append({"name": node.name, "op": node.op_type, "domain": node.domain,
                                        "inputs": [info(v) for v in node.inputs if v is not None],
                                        "outputs": [info(v) for v in node.outputs]})
        self.steps.append(st.Profile(prof, dims))

    def _slot(self, v: Value) -> str:
        """The ``void *`` that owns a heap or output value's memory."""
        loc = self.locs[v]
        return self._output_var(loc.output_index) if loc.kind == "output" else f"heap[{loc.slot}]"

    def _heap_loc(self, v: Value, free: str) -> _Loc:
        """A value on the heap: its variable, and the slot of the function's heap slots that owns
        its memory (c/steps.j2, heap_slots)."""
        var = self.mangle(v.name, "t_")
        return _Loc(var, "heap", free=free, slot=self.mangle.derived(var, "_mem"))

    def _emit_body(self, node: Node, attr: str, k: KernelContext) -> dict[str, Any]:
        """Emit ``node``'s body ``attr`` as a function; what the node's kernel needs to call it."""
        body = node.subgraphs[attr]
        caps = free_values(body)
        name = self.mangle(f"{node.name or node.op_type}_{attr}", f"{self.scope}body_")
        sub = CEmitter(body, self.opt, self.unit, entry_inputs=list(body.inputs) + caps,
                       outer_ready=frozenset(self._dims_ready), is_body=True, scope=name + "_")
        fn = sub.emit_function()
        self.unit.functions.append({"kind": "body", "name": name, "run": fn,
                                    "comment": comment(f"{attr} of {node.op_type} '{node.name}'")})
        cap_refs = [k.captures[v] for v in caps]
        return {
            "fn": name,
            "captures": [t.name for t in cap_refs],
            "capture_dims": [cexpr.lit(d) for t in cap_refs for d in t.dims],
            "outer_dims": [k.dim(s) for s in sub.outer_dims],
            "outputs": [{"rank": len(v.shape) if v.is_tensor else 0, "ctype": v.dtype.c_type,
                         "itemsize": v.dtype.itemsize, "kind": v.kind, "free": _free_fn(v)}
                        for v in body.outputs],
        }

    # --- outputs --------------------------------------------------------------
    def _output_slots(self) -> dict[Value, list[int]]:
        """Values computed by a node straight into an output buffer (first slot wins)."""
        slots: dict[Value, list[int]] = {}
        inputs = set(self.entry_inputs)
        for i, v in enumerate(self.g.outputs):
            if v.const is None and v not in inputs:
                slots.setdefault(v, []).append(i)
        return slots

    def _output_var(self, i: int) -> str:
        return f"out{i}"

    def _emit_output(self, i: int, v: Value) -> None:
        self._require_value_dims(v)
        loc = self._loc(v)
        shape_pos = sum(len(o.shape) for o in self.g.outputs[:i] if o.is_tensor)
        dims = [cexpr.lit(self.dim(d)) for d in v.shape] if v.is_tensor else []
        if not (loc.kind == "output" and loc.output_index == i):
            self.steps.append(st.CopyOutput(i, loc.var, not v.is_tensor, self._nbytes_expr(v) if v.is_tensor else "0",
                                            self._output_var(i)))
        else:
            self.steps.append(st.BindOutput(i, loc.var, self._output_var(i)))
        self.steps.append(st.OutputShape(shape_pos, dims))

    # --- sizes ---------------------------------------------------------------------
    def _nbytes_static(self, v: Value) -> int:
        return num_elements(v.shape) * v.dtype.itemsize

    # --- bounded dims (embedded builds) ------------------------------------
    def dim_bound(self, d) -> Optional[int]:
        """The largest value dim ``d`` takes when the bounded input dims stay within their
        bounds (None: not bounded). Sizes grow with their operands except through sub, mod
        and data-dependent dims, which are not bounded; every use is also checked at run time."""
        if isinstance(d, int):
            return d
        return self._dim_value(d, self.opt.dim_bounds, bound=True) if self.opt.dim_bounds else None

    def _bounded_bytes(self, v: Value) -> Optional[int]:
        """Bytes of ``v`` at the dims' bounds, where its dims are bounded (embedded builds)."""
        if not self.opt.dim_bounds or not v.is_tensor or v.shape is None:
            return None
        dims = [self.dim_bound(d) for d in v.shape]
        return None if any(d is None for d in dims) else num_elements(dims) * v.dtype.itemsize

    def _bounded_scratch(self, size: str) -> Optional[int]:
        """The largest value of a scratch size (a ``cexpr`` expression of dim variables) over
        every size of the bounded input dims it depends on (at their bounds where there are too
        many); None where it names an unbounded dim or text cexpr cannot evaluate."""
        symbols = cexpr.symbols(size)
        if not self.opt.dim_bounds or symbols is None:
            return None
        names = {self.dim_var(sym): sym for sym in self.g.dims.defs}
        used = sorted(symbols & set(names))
        if any(self.dim_bound(names[u]) is None for u in used):
            return None
        inputs = sorted({i for u in used for i in self._input_syms(names[u])})
        try:
            if np.prod([self.opt.dim_bounds[i] + 1 for i in inputs], dtype=float) > 4096:
                return cexpr.evaluate(size, {u: self.dim_bound(names[u]) for u in used})
            best = 0
            for combo in itertools.product(*[range(self.opt.dim_bounds[i] + 1) for i in inputs]):
                env = dict(zip(inputs, combo))
                values = {u: self._dim_value(names[u], env) for u in used}
                if any(v is None for v in values.values()):
                    return cexpr.evaluate(size, {u: self.dim_bound(names[u]) for u in used})
                best = max(best, cexpr.evaluate(size, values))
            return best
        except ValueError:
            return None

    def _input_syms(self, d) -> set[str]:
        """The input dims symbol ``d`` is computed from."""
        if isinstance(d, int):
            return set()
        spec = self.g.dims.defs[d]
        if spec.kind == "input":
            return {d}
        return set().union(*[self._input_syms(a) for a in spec.args]) if spec.kind == "expr" else set()

    def _dim_value(self, d, env: dict[str, int], bound: bool = False) -> Optional[int]:
        """Dim ``d`` for input dims ``env`` (None where it is not computable here); with
        ``bound``, only through operations that grow with their operands, so that the input
        dims' bounds give ``d``'s."""
        if isinstance(d, int):
            return d
        spec = self.g.dims.defs.get(d)
        if spec is None or spec.kind == "data":
            return None
        if spec.kind == "input":
            return env.get(d)
        x, y = spec.args
        if bound and not (spec.op in ("add", "mul", "max", "min", "same", "bcast")
                          or (spec.op in ("floordiv", "ceildiv") and isinstance(y, int) and y > 0)
                          or (spec.op == "sub" and isinstance(y, int))):
            return None
        a, b = self._dim_value(x, env, bound), self._dim_value(y, env, bound)
        if a is None or b is None:
            return None
        if spec.op in ("same", "bcast"):
            return max(a, b)
        fold = _DIM_FOLD.get(spec.op)
        if fold is None or (spec.op in ("floordiv", "ceildiv", "mod") and b == 0):
            return None
        return fold(a, b)

    def _nbytes_expr(self, v: Value) -> str:
        return cexpr.lit(cexpr.mul(v.dtype.itemsize, *[self.dim(d) for d in v.shape]))

    def _views(self, buffers: list[memory.Buffer[Value]]) -> dict[Value, tuple[Value, int]]:
        """Input buffer -> (output buffer, byte offset) where it is planned inside a node's
        output (OpDef.input_views): both in the arena, the input read once by that node and
        placed in one output only."""
        in_arena = {b.key for b in buffers}
        views: dict[Value, tuple[Value, int]] = {}
        for node in self.g.nodes:
            out = node.outputs[0] if len(node.outputs) == 1 else None
            if out is None or out not in in_arena or node.subgraphs:
                continue
            for i, offset in node.impl.input_views(node):
                v = node.inputs[i]
                if v is not None and v in in_arena and v not in views and sum(x is v for x in node.inputs) == 1:
                    views[v] = (out, offset)
        return views

    def _in_place(self, buffers: list[memory.Buffer[Value]], when: dict[Node, int],
                  last_use: dict[Value, int], views: dict[Value, tuple[Value, int]]) -> dict[Value, Value]:
        """Output buffer -> the input buffer it is written over: an input its node may
        overwrite (OpDef.in_place) that dies at that node, in the arena, of the same size,
        neither of them a view or holding views (their bytes are not theirs alone)."""
        in_arena = {b.key: b for b in buffers}
        viewed = set(views) | {outer for outer, _ in views.values()}
        taken: set[Value] = set(viewed)
        shares: dict[Value, Value] = {}
        for node in self.g.nodes:
            out = node.outputs[0] if len(node.outputs) == 1 else None
            if out is None or out not in in_arena or out in viewed or node.subgraphs:
                continue
            for i in node.impl.in_place(node):
                v = node.inputs[i]
                buf = in_arena.get(v) if v is not None else None
                if v is None or buf is None or v in taken or last_use.get(v) != when[node] \
                        or buf.size != in_arena[out].size:
                    continue
                shares[out] = v
                taken.add(v)
                break
        return shares

    def _last_uses(self, when: dict[Node, int]) -> dict[Value, int]:
        last: dict[Value, int] = {}
        for node in self.g.nodes:
            for v in reads(node):
                last[v] = max(last.get(v, -1), when[node])
        end = max(when.values(), default=0) + 1
        for v in self.g.outputs:
            last[v] = end
        return last

    def _run_together(self, start: int, count: int) -> None:
        """The node calls emitted from ``start`` become one parallel step, when nothing else
        needs to happen between them (no computed dims, heap scratch, adopted outputs)."""
        steps = self.steps[start:]
        calls = [s for s in steps if isinstance(s, st.Call)]
        if len(calls) != count or any(not isinstance(s, (st.Call, st.Dim, st.Arena, st.Alloc))
                                      or (isinstance(s, st.Alloc) and s.scratch) for s in steps):
            return
        others = [s for s in steps if not isinstance(s, st.Call)]
        self.steps[start:] = others + [st.Parallel(calls, self.opt.inter_threads)]


def _levels(g: Graph) -> dict[Node, int]:
    """node -> when it runs: nodes with the same time do not depend on each other
    (ExecutionMode.ORT_PARALLEL runs them together). A node's level is one more than the
    deepest node it reads from; nodes with string tensors share the context's string pool,
    so each gets a time of its own after its level's group."""
    made_by: dict[Value, Node] = {o: n for n in g.nodes for o in n.outputs}
    level: dict[Node, int] = {}
    band = len(g.nodes) + 1
    when: dict[Node, int] = {}
    for i, n in enumerate(g.nodes):
        deps = [level[made_by[v]] for v in reads(n) if v in made_by]
        level[n] = max(deps) + 1 if deps else 0
        strings = any(v.dtype is dt.STRING for v in list(reads(n)) + list(n.outputs))
        when[n] = level[n] * band + (i + 1 if strings else 0)
    return when


def _ctype(v: Value) -> str:
    if v.kind == "map":
        return "onnxc_map"
    return v.dtype.c_type if v.is_tensor else "onnxc_seq"


def _free_fn(v: Value) -> str:
    return "free" if v.is_tensor else "onnxc_seq_free"


def _common(k: KernelContext) -> dict[str, Any]:
    return {"inputs": [t.data() if t is not None else None for t in k.inputs],
            "outputs": [t.data() for t in k.outputs],
            "data_dims": k.data_dims}


def _parameters(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """A node function's parameters from (C type, name) pairs: their declarations, and their names
    (what a call passes them as)."""
    return {"params": [f"{ctype}{'' if ctype.endswith('*') else ' '}{plain(name)}" for ctype, name in pairs],
            "arg_names": [plain(name) for _, name in pairs]}


def _output_syms(node: Node) -> list[str]:
    seen: list[str] = []
    for v in node.outputs:
        for d in v.shape if v.is_tensor else ():
            if isinstance(d, str) and d not in seen:
                seen.append(d)
    return seen


def _spec_names(node: Node) -> tuple[list[str], list[str]]:
    """Parameter names from the op's schema (X, W, B, Y ...); variadic ones get an index."""
    try:
        schema = onnx.defs.get_schema(node.op_type, node.opset, node.domain)
        formal_in = [p.name for p in schema.inputs]
        formal_out = [p.name for p in schema.outputs]
    except onnx.defs.SchemaError:   # ops of other domains may name their parameters themselves
        formal_in, formal_out = list(node.impl.formal_inputs), list(node.impl.formal_outputs)

    def names(formal: list[str], count: int, fallback: str) -> list[str]:
        out = []
        for i in range(count):
            if i < len(formal) and not (i == len(formal) - 1 and count > len(formal)):
                out.append(formal[i])
            elif formal:
                out.append(f"{formal[-1]}_{i - len(formal) + 1}")
            else:
                out.append(f"{fallback}{i}")
        if formal and count > len(formal):
            out[len(formal) - 1] = f"{formal[-1]}_0"
        return out
    inputs = names(formal_in, len(node.inputs), "input")
    # Old schemas reuse an input's name for an output (BatchNormalization-6's mean and var).
    outputs = [f"{n}_out" if n in inputs else n for n in names(formal_out, len(node.outputs), "output")]
    return inputs, outputs
