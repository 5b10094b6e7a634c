"""What an op's lowering sees (:class:`KernelContext`) and returns (:class:`Kernel`).

A lowering turns one IR node into a kernel family template plus the plain data
that template needs; C expressions for dims come from here so that symbolic
dims are rendered the same way everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..compiler import dtypes as dt
from ..compiler.errors import UnsupportedError
from ..compiler.ir import Node, Value
from . import cexpr
from .cexpr import CExpr
from .uses import Uses, fill, plain

if TYPE_CHECKING:
    from .cuda_shells import Shell


_CONTAINER_CTYPE = {"map": "onnxc_map"}


@dataclass
class TensorRef:
    """A node's input or output as the kernel sees it: a C name, types and dims.

    ``name`` and the symbolic ``dims`` are ``uses.CText``: writing them into the body is what
    makes the tensor and the dims parameters of the node function."""
    name: str                  # C parameter name inside the node function (spec name)
    dtype: dt.DType
    shape: tuple               # IR dims
    dims: list[CExpr]          # C expressions (ints stay ints)
    value: Optional[np.ndarray] = None  # known constant value, if any
    kind: str = "tensor"       # or a container: "sequence", "optional", "optional_sequence", "map"
    key_dtype: Optional[dt.DType] = None   # a map's keys

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def ctype(self) -> str:
        return self.dtype.c_type if self.kind == "tensor" else _CONTAINER_CTYPE.get(self.kind, "onnxc_seq")

    @property
    def compute(self) -> str:
        return self.dtype.compute

    @property
    def numel(self) -> CExpr:
        return cexpr.prod(self.dims)

    @property
    def strides(self) -> list[CExpr]:
        return cexpr.strides(self.dims)

    def load(self, index: str) -> str:
        """C expression: element ``index`` converted to the compute type."""
        return fill(self.dtype.load, fill("{}[{}]", self.name, index))

    def store(self, expr: str) -> str:
        """C expression: compute-type ``expr`` converted to the storage type (explicitly: a
        double computed for a float output narrows on purpose, -Wconversion stays quiet)."""
        if self.dtype.store == "{}" and self.dtype.kind != "string":
            return fill("({})({})", self.dtype.c_type, expr)
        return fill(self.dtype.store, expr)

    def data(self) -> dict[str, Any]:
        """Plain template data."""
        if self.kind != "tensor":
            return {"name": self.name, "ctype": self.ctype, "kind": self.kind, "elem_ctype": self.dtype.c_type,
                    "key_ctype": self.key_dtype.c_type if self.key_dtype is not None else None,
                    "itemsize": self.dtype.itemsize, "elem_rank": len(self.shape) if self.shape is not None else -1,
                    "rank": 0, "dims": [], "numel": "0", "strides": []}
        return {"name": self.name, "ctype": self.ctype, "kind": self.kind, "compute": self.compute, "rank": self.rank,
                "dims": [cexpr.lit(d) for d in self.dims], "numel": cexpr.lit(self.numel),
                "strides": [cexpr.lit(s) for s in self.strides]}


@dataclass(frozen=True)
class Target:
    """What lowerings may specialise for: the float32 GEMM micro-kernel tile of the build
    target (c/helpers/sgemm.c.j2) and whether constant weights are packed for it at compile
    time (optimization level ALL), and whether 3x3 convolutions may use Winograd's algorithm
    (the ``conv_winograd`` lowering) and small ones be computed directly (``conv_direct``)."""
    gemm_mr: int = 4
    gemm_nr: int = 16
    prepack: bool = False
    winograd: bool = False  # 3x3 convolutions by Winograd's algorithm where it pays (needs prepack)
    direct_conv: bool = False   # small one-group convolutions computed directly (needs prepack)
    threads: int = 1       # intra-op threads: kernels that split work size scratch for each
    # Blocks and buffers sized for a microcontroller's RAM (``--target c``): the GEMM packs
    # blocks of at most 64 x 4 panels (ONNXC_SMALL_MEMORY in C) and im2col works in smaller bands.
    small_memory: bool = False
    # Quantized kernels (QLinearConv, QLinearMatMul, QGemm) in integer arithmetic only, reading
    # int8 weights in place without converted copies: no float unit needed (``--target c``).
    integer_only: bool = False
    # Quantized matrix products and convolutions through the 8-bit GEMM helper
    # (c/helpers/qgemm.c.j2: VNNI where the build has it): native builds, not packages or CUDA.
    int8_gemm: bool = False
    # How those kernels requantize int32 accumulators: "float" (onnxruntime's float32 product,
    # rounded half to even) or "fixed_point" (TFLite's and CMSIS-NN's multiplier and shift).
    requantize: str = "float"
    # Eligible int8 convolutions and matrix products call CMSIS-NN (--cmsis-nn, --target c;
    # implies fixed_point).
    cmsis_nn: bool = False
    # The build may link the system's libraries (image codecs): not a freestanding package.
    system_libraries: bool = True
    # "bf16": the float32 GEMM's products (MatMul, Gemm, Conv through it) in bfloat16 with float32
    # sums (c/helpers/sgemm.c.j2, AVX512-BF16); "fp32": float32 throughout.
    precision: str = "fp32"
    # 2-D transpositions copied in tiles that stay in cache (c/transpose_2d.c.j2): C builds, not
    # CUDA, whose copy shell runs a GPU thread per element.
    tiled_transpose: bool = False


@dataclass
class Kernel:
    """A lowered node: template name (under templates/) and its data."""
    template: str
    data: dict[str, Any] = field(default_factory=dict)
    # For ops whose output dims depend on input values: a template computing them.
    shape_template: Optional[str] = None
    shape_data: dict[str, Any] = field(default_factory=dict)
    # Extra scratch buffers: name -> byte-size C expression.
    scratch: dict[str, CExpr] = field(default_factory=dict)
    # File-level helper templates (static functions) this kernel calls; each is emitted once.
    helpers: list[str] = field(default_factory=list)
    # Constants the lowering derived from constant inputs (e.g. packed weights): parameter
    # name -> array; they go to the weights like initializers.
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    # System libraries the helpers call (names in codegen/system_libraries.py): linked into
    # this model's library only.
    libraries: list[str] = field(default_factory=list)
    # What the reader of the generated code should know about how the node is computed (a
    # comment at the top of its function; packages list the notes in their README).
    note: str = ""
    # The body, its shape template or its helpers call the C allocator themselves (sequence
    # elements, a sort's work buffer, a decoder's rows): never in a freestanding build.
    allocates: bool = False
    # How a backend's loop shell of the family runs the node (its launch, variant and the scratch
    # it does without, codegen/cuda_shells): set by the emitter from the data above, None for
    # the C loops.
    shell: Optional[Shell] = None


class KernelContext:
    def __init__(self, node: Node, inputs: list[Optional[TensorRef]], outputs: list[TensorRef],
                 dim: Callable[[Any], CExpr], data_dims: list[str], target: Target = Target(),
                 uses: Optional[Uses] = None) -> None:
        self.node = node
        self.target = target
        self.constants: dict[str, np.ndarray] = {}
        self.attrs = node.attrs
        self.inputs = inputs
        self.outputs = outputs
        self._dim = dim
        # What the node function's text names (tensors, dims): its parameters.
        self.uses = uses if uses is not None else Uses()
        # C names of the pointer parameters through which a shape template sets data dims.
        self.data_dims = data_dims
        # Control flow: enclosing-graph values the node's bodies read (value -> parameter), and
        # the emitter's callback that emits a body as a function.
        self.captures: dict[Value, TensorRef] = {}
        self.emit_body: Optional[Callable[[str], dict[str, Any]]] = None
        self.new_random_stream: Optional[Callable[[], Optional[int]]] = None

    def dim(self, d) -> CExpr:
        return self._dim(d)

    def data_dim_ptr(self, dim: CExpr) -> Optional[str]:
        """The ``int64_t *`` a shape template sets for this (C-rendered) dim, if the node computes it."""
        ptr = f"out_{plain(dim)}" if isinstance(dim, str) else None   # (names the pointer, not the dim)
        return ptr if ptr in self.data_dims else None

    def body(self, attr: str) -> dict[str, Any]:
        """Emit the body graph ``attr`` as a function taking its formal inputs, then the values
        it captures; returns its name and what to pass it (plain data for templates)."""
        return self.emit_body(attr)

    def random_stream(self) -> Optional[int]:
        """A random node's slot in the context (its calls in a run, c/helpers/random.c.j2, which
        the kernel lists); None from a backend that cannot draw."""
        return self.new_random_stream()

    def output_dims(self, i: int) -> list[dict[str, Any]]:
        """For kernels that compute output shapes: each dim of output ``i`` as the pointer to
        set (a dim computed by this node) or the C value it must equal."""
        t = self.outputs[i]
        return [{"ptr": self.data_dim_ptr(d), "value": cexpr.lit(d)} for d in t.dims]

    def input(self, i: int) -> TensorRef:
        t = self.inputs[i] if i < len(self.inputs) else None
        if t is None:
            raise UnsupportedError(f"{self.node.label}: input {i} is required")
        return t

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    @property
    def out(self) -> TensorRef:
        return self.outputs[0]

    def unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"{self.node.label}: {what}")

    def constant(self, name: str, array: np.ndarray) -> str:
        """A constant derived at compile time, passed to the kernel as parameter ``name``."""
        taken = {t.name for t in self.inputs + self.outputs if t is not None}
        if name in taken or name in self.constants:
            raise ValueError(f"internal: constant parameter {name!r} is already a parameter")
        self.constants[name] = np.ascontiguousarray(array)
        return self.uses.tensor(name)

    def kernel(self, template: str, helpers: tuple[str, ...] = (), allocates: bool = False, **data: Any) -> Kernel:
        """The lowered node; ``allocates``: its templates call malloc/free (``Kernel.allocates``)."""
        return Kernel(template, data, helpers=list(helpers), constants=dict(self.constants), allocates=allocates)
