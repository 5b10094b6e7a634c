"""The C ABI of a model library, declared once: the functions a build exports (each named
``<prefix>_<name>``) and the structs its callers read. ``model.h`` is rendered from these lists
(``templates/c/model.h.j2``), the loader declares the same text to cffi (``runtime/loader.py``)
and the sequence and map helpers define their structs from them; the functions' definitions
are the API section of ``templates/c/model.c.j2``, which tests compile against the header.

Plain data and no imports beyond the standard library: the runtime reads it without the compiler.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Iterable

# The dims a sequence element keeps (ONNXC_SEQ_MAX_RANK): an element's dims start at
# ``dims + i * SEQ_MAX_RANK``.
SEQ_MAX_RANK = 8


@dataclass(frozen=True)
class Function:
    """``returns <prefix>_name(params)``: exported by every build, or only by builds with the
    feature ``needs`` ("cuda": CUDA builds; "random": models with random operators;
    "sequences": models with sequence, optional or map values)."""
    name: str
    returns: str
    params: tuple[str, ...]
    doc: str
    needs: str = ""

    def declaration(self, prefix: str, width: int = 100) -> str:
        """The prototype, its parameters wrapped under the first one past ``width`` columns."""
        head = f"{self.returns}{'' if self.returns.endswith('*') else ' '}{prefix}_{self.name}("
        params = list(self.params) or ["void"]
        lines = [head]
        for i, param in enumerate(params):
            text = param + (");" if i == len(params) - 1 else ",")
            if lines[-1] != head and len(lines[-1]) + 1 + len(text) > width:
                lines.append(" " * len(head) + text)
            else:
                lines[-1] += ("" if lines[-1] == head else " ") + text
        return "\n".join(lines)


@dataclass(frozen=True)
class Struct:
    """``typedef struct name {...} name;``: fields as (declaration, note) pairs; a note is written
    as a comment from column ``note_column`` of the field's line. ``model.h`` defines it in builds
    with the feature ``needs`` ("sequences", or "maps": models with map inputs)."""
    name: str
    fields: tuple[tuple[str, str], ...]
    doc: str
    needs: str
    note_column: int = 0


FUNCTIONS = (
    Function("context_size", "size_t", (),
             "Bytes a caller allocates for one context (one run at a time per context)."),
    Function("context_init", "int", ("void *ctx", "const void *weights", "size_t weights_size"),
             "Binds the weights file; allocates the arena. Returns 0 on success."),
    Function("context_release", "void", ("void *ctx",),
             "Frees what init and runs allocated (not the context memory itself)."),
    Function("run", "int", ("void *ctx", "const void *const *inputs", "const int64_t *in_shapes",
                            "void **outputs", "int64_t *out_shapes"),
             "Runs the model. in_shapes: every input's dims, concatenated. Outputs are allocated here "
             "(free each with {prefix}_free); out_shapes receives their dims."),
    Function("free", "void", ("void *p",), "Frees an output the model allocated."),
    Function("error", "const char *", ("const void *ctx",),
             "The message of the last failure on this context."),
    Function("terminate", "void", ("void *ctx", "int flag"),
             "Asks a run in progress on this context (from another thread) to stop at the next node, "
             "or clears the request."),
    Function("set_spinning", "void", ("void *ctx", "int flag"),
             "Whether the threads of this context's pool spin while they wait for work (the default) "
             "or sleep as soon as they have none (flag 0)."),
    Function("bind_outputs", "void", ("void *ctx", "void *const *bufs", "const int64_t *bytes", "int64_t count"),
             "Binds caller buffers (and their sizes in bytes) that the next runs write outputs into "
             "when they are big enough; count 0 unbinds."),
    Function("set_custom_ops", "void", ("void *ctx", "const void *const *ops", "int64_t count"),
             "The custom-op descriptions this model's custom nodes call, in the manifest's order."),
    Function("set_random", "void", ("void *ctx", "uint64_t seed", "uint64_t *runs"),
             "Random operators without a seed attribute draw from `seed`; runs take their numbers "
             "from `runs`, the counter every context of a session shares (NULL: the context's own).",
             needs="random"),
    Function("profile", "void", ("void *ctx", "int64_t *buf", "int64_t cap"),
             "Profiling builds record node events into `buf` (room for `cap`); NULL stops recording."),
    Function("profile_count", "int64_t", ("const void *ctx",),
             "The events recorded since `profile` was called (more than `cap`: some were dropped)."),
    Function("arena_bytes", "size_t", (), "Bytes of the static arena."),
    Function("seq_free", "void", ("void *p",),
             "Releases a sequence or optional output (an onnxc_seq) and its elements.", needs="sequences"),
    Function("inputs_on_device", "void", ("void *ctx", "const unsigned char *flags", "int64_t count"),
             "Which inputs of the next runs the caller passes in device memory (flags[i] != 0): they "
             "are read in place, not copied to the device.", needs="cuda"),
    Function("device_free", "void", ("void *p",),
             "Releases an output the model made in device memory (bound to the device with no buffer).",
             needs="cuda"),
    Function("set_stream", "int", ("void *ctx", "void *stream"),
             "Runs on this context go to the caller's stream (a cudaStream_t); NULL: back to a stream "
             "of its own.", needs="cuda"),
    Function("enable_graph", "int", ("void *ctx", "int flag"),
             "Runs whose inputs and outputs are all in device memory are captured as a CUDA graph the "
             "first time, and replayed while the pointers and input dims stay the same. Fails for a "
             "model that cannot be captured.", needs="cuda"),
)

STRUCTS = (
    Struct("onnxc_seq", (
        ("int64_t count;", ""),
        ("int64_t cap;", ""),
        ("int64_t none;", "an optional that holds nothing"),
        ("int64_t itemsize;", ""),
        ("void **data;", "count element buffers"),
        ("int32_t *ranks;", "count ranks"),
        ("int64_t *dims;", "ONNXC_SEQ_MAX_RANK dims per element"),
    ), "A sequence or optional value: element buffers with their own ranks and dims.", "sequences", 19),
    Struct("onnxc_map", (
        ("int64_t count;", ""),
        ("const void *keys;", ""),
        ("const void *values;", ""),
    ), "A map input: count entries as parallel arrays, keys ascending.", "maps"),
)


def exported(features: Iterable[str]) -> list[Function]:
    """The functions a build with ``features`` exports, in declaration order."""
    have = set(features)
    return [f for f in FUNCTIONS if not f.needs or f.needs in have]


def struct_data(struct: Struct) -> dict[str, Any]:
    """A struct as template data (``c/abi.j2``'s ``typedef``)."""
    return {"name": struct.name, "doc": struct.doc,
            "fields": [{"decl": decl, "note": note, "pad": max(struct.note_column - len(decl), 1)}
                       for decl, note in struct.fields]}


def helper_data() -> dict[str, Any]:
    """What the sequence and map helpers define their structs from."""
    return {"abi_structs": {s.name: struct_data(s) for s in STRUCTS}, "seq_max_rank": SEQ_MAX_RANK}


def header_data(prefix: str, features: Iterable[str]) -> dict[str, Any]:
    """What ``c/model.h.j2`` declares for a build with ``features``."""
    features = set(features)
    return {"functions": [{"doc": textwrap.wrap(f.doc.format(prefix=prefix), 92),
                           "declaration": f.declaration(prefix)} for f in exported(features)],
            "structs": [struct_data(s) for s in STRUCTS if s.needs in features],
            "seq_max_rank": SEQ_MAX_RANK if "sequences" in features else 0}


def cdef(prefix: str) -> str:
    """Every function and struct, as cffi reads them (a build need not export all)."""
    functions = [f.declaration(prefix, width=10**6) for f in FUNCTIONS]
    types = [f"typedef struct {s.name} {{ {' '.join(decl for decl, _ in s.fields)} }} {s.name};" for s in STRUCTS]
    return "\n".join(functions + types) + "\n"
