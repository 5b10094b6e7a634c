"""The steps of a graph's function: what the emitters decide, in order, and the templates spell out.

A function (the model's entry point, or a control-flow body) is a list of these steps. Each kind
is rendered by one macro of the backend's step templates (``templates/c/steps.j2``, and
``templates/cuda/steps.j2``, which renders the kinds that differ on a GPU and takes the C macros
for the rest), dispatched by the step's ``kind``. A step holds what every backend needs to render
it; no backend edits another's steps.

Fields named ``var`` are C identifiers the emitter mangled; ``bytes``, ``value`` and dims are C
expressions; ``where`` and ``what`` are C string literals (escaped, quotes included).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional, Union


@dataclass
class Launch:
    """How a node's kernel spreads over the GPU's threads (a kernel family's CUDA template)."""
    items: str          # the work items, a C expression
    threads: int        # threads of a block
    per_block: int      # the items one block takes in a pass: ``threads`` (grid-stride loops) or 1 (a block a row)
    sync: bool          # the block's threads meet at __syncthreads


@dataclass
class Staged:
    """A tensor in device memory that a node run on the host reads (or writes) through a host copy."""
    bytes: str
    ctype: str
    var: str


@dataclass
class Read:
    """A tensor in device memory that a node's call reads: its argument's place in ``Call.args``."""
    pos: int
    bytes: str
    ctype: str


@dataclass
class ArenaCheck:
    """A value of bounded dims in the arena: its actual bytes must fit the room planned for the bounds."""
    bytes: str
    room: int


@dataclass
class Step:
    """One step of a function; ``kind`` names the macro that renders it."""
    kind: ClassVar[str]


@dataclass
class Input(Step):
    """Binds input ``index`` of the function to a typed pointer."""
    kind: ClassVar[str] = "input"
    var: str
    ctype: str
    index: int


@dataclass
class BindDim(Step):
    """Binds a symbolic dim to the entry's shape array at ``pos`` (a negative one fails)."""
    kind: ClassVar[str] = "bind_dim"
    pos: int
    var: str
    where: str


@dataclass
class CheckDim(Step):
    """Checks that the dim at ``pos`` of the shape array is ``value`` (a fixed dim, or one bound before)."""
    kind: ClassVar[str] = "check_dim"
    pos: int
    value: str
    where: str


@dataclass
class Dim(Step):
    """Computes a derived dim ``var = op(a, b)``; a negative result (or dims that do not fit) fails."""
    kind: ClassVar[str] = "dim"
    var: str
    op: str
    a: str
    b: str
    what: str


@dataclass
class DeclareDim(Step):
    """Declares a dim that a node computes from data (its function writes it)."""
    kind: ClassVar[str] = "declare_dim"
    var: str


@dataclass
class Arena(Step):
    """A value (or a node's scratch) at byte ``offset`` of the arena (an int, or a C expression)."""
    kind: ClassVar[str] = "arena"
    var: str
    ctype: str
    offset: Union[int, str]
    check: Optional[ArenaCheck] = None


@dataclass
class Alloc(Step):
    """Memory of a run-time size: a heap value or scratch (``heap``: owned by the function's heap
    slot ``slot``), else output ``output`` of the function; ``scratch``: a node's scratch, freed
    after its call; ``host``: in host memory in every build (string tensors)."""
    kind: ClassVar[str] = "alloc"
    var: str
    ctype: str
    bytes: str
    heap: bool
    output: int
    host: bool = False
    scratch: bool = False
    slot: str = ""


@dataclass
class Call(Step):
    """Calls a node's function with ``args``; ``prof``: the profile event it records, if any;
    ``launch``: how the GPU runs it, if its family spreads over threads; ``reads``: its tensor
    arguments in device memory; ``scratch``: it takes scratch memory."""
    kind: ClassVar[str] = "call"
    fn: str
    args: list[str]
    comment: str
    prof: Optional[int] = None
    launch: Optional[Launch] = None
    reads: list[Read] = field(default_factory=list)
    scratch: bool = False


@dataclass
class HostCall(Step):
    """Calls a function that runs on the host in every build (``why``): where tensors live in
    device memory, with ``host_args``, on host copies of the tensors it reads (``stage``, named
    ``staged<i>`` in ``host_args``) and writes (``results``, named ``result<i>``); elsewhere
    with ``args``."""
    kind: ClassVar[str] = "host_call"
    fn: str
    args: list[str]
    comment: str
    why: str
    host_args: list[str]
    stage: list[Staged]
    results: list[Staged] = field(default_factory=list)
    prof: Optional[int] = None


@dataclass
class Parallel(Step):
    """Node calls that do not depend on each other, run together on ``threads`` threads."""
    kind: ClassVar[str] = "parallel"
    calls: list[Call]
    threads: int


@dataclass
class Profile(Step):
    """Records profile event ``id`` (started by its call) with the dims of the node's tensors."""
    kind: ClassVar[str] = "profile"
    id: int
    dims: list[str]


@dataclass
class Adopt(Step):
    """Takes a value a node allocated itself (control flow) from ``slot``. ``device_bytes``: the
    bytes of a tensor, where a build keeps tensors in device memory (the node made it on the
    host); None for a container or a tensor that lives on the host."""
    kind: ClassVar[str] = "adopt"
    var: str
    ctype: str
    slot: str
    device_bytes: Optional[str] = None


@dataclass
class Free(Step):
    """Releases the memory of a heap value or scratch (its heap slot ``slot``) with ``free``."""
    kind: ClassVar[str] = "free"
    var: str
    free: str
    slot: str


@dataclass
class CopyOutput(Step):
    """Copies ``src`` into output ``index`` of the function (``var``): a tensor of ``bytes``, or
    a clone of a sequence or optional (``seq``)."""
    kind: ClassVar[str] = "copy_output"
    index: int
    src: str
    seq: bool
    bytes: str
    var: str


@dataclass
class BindOutput(Step):
    """Output ``index`` was computed in place (its slot ``out``)."""
    kind: ClassVar[str] = "bind_output"
    index: int
    var: str
    out: str


@dataclass
class OutputShape(Step):
    """Writes an output's dims into the shape array from ``pos``."""
    kind: ClassVar[str] = "output_shape"
    pos: int
    dims: list[str]


@dataclass
class ToDevice(Step):
    """Copies entry input ``index`` to device memory, unless the caller passed it there."""
    kind: ClassVar[str] = "to_device"
    index: int
    var: str
    ctype: str
    bytes: str
