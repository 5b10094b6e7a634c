"""Mutants of the seed models and what onnxc does with one.

A mutant is a seed's serialized bytes after a few mutations: bytes flipped, inserted or
deleted, the tail cut, spans spliced from another seed, or one protobuf field set to an odd
value (a huge or negative int, a name of another value, a path out of the folder, a message
cleared or duplicated). ``try_input`` loads it in ``onnxc.InferenceSession`` and runs it once
on zeros; every outcome but an exception foreign to onnxc is named by ``outcome_class``.
"""
from __future__ import annotations

import random
import re
import threading
from typing import Any, Optional

import numpy as np
import onnx

# Larger zero inputs are not fed (the run is skipped): a mutated dim may ask for gigabytes.
MAX_FEED_ELEMENTS = 1 << 20
RUN_SECONDS = 10.0   # a mutant's run is stopped (RunOptions.terminate) after this long
MUTATION_KINDS = ("flip", "truncate", "insert", "delete", "splice", "field", "field")  # (fields twice: they parse)
MAX_POSITION = 1 << 16
MESSAGE_CHARACTERS = 48


# --- mutations -----------------------------------------------------------------------------------

ODD_INTS = [0, 1, -1, 2, 3, 7, 255, 1 << 31, -(1 << 31), (1 << 31) - 1, 1 << 40, -(1 << 40), (1 << 63) - 1, -(1 << 63)]
ODD_STRINGS = ["", "x", "y", "w1", "c", "acc", "../../etc/passwd", "/etc/passwd", "\x00", "é", "If", "Loop",
               "com.example", "ai.onnx.ml"]
ODD_FLOATS = [0.0, -0.0, 1e38, -1e-45, float("nan"), float("inf")]


def mutate(data: bytes, ops: list[tuple], seeds: dict[str, bytes]) -> bytes:
    """Apply byte-level and protobuf-field mutations in order (positions wrap around)."""
    for op in ops:
        kind = op[0]
        n = max(len(data), 1)
        if kind == "flip":
            pos = op[1] % n
            data = data[:pos] + bytes([data[pos] ^ op[2]]) + data[pos + 1:] if data else data
        elif kind == "truncate":
            data = data[:op[1] % n]
        elif kind == "insert":
            pos = op[1] % (len(data) + 1)
            data = data[:pos] + op[2] + data[pos:]
        elif kind == "delete":
            pos = op[1] % n
            data = data[:pos] + data[pos + op[2]:]
        elif kind == "splice":
            donor = seeds[sorted(seeds)[op[1] % len(seeds)]]
            start = op[2] % len(donor)
            pos = op[3] % (len(data) + 1)
            data = data[:pos] + donor[start:start + op[4]] + data[pos + op[4]:]
        elif kind == "field":
            data = mutate_field(data, op[1], op[2])
    return data


def mutate_field(data: bytes, which: int, choice: int) -> bytes:
    """Parse ``data`` as a ModelProto and change its ``which``-th field (in a walk over every
    message): scalars take an odd value, repeated fields lose or repeat an element, messages
    are cleared. Bytes that do not parse are returned as they are."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        return data
    fields = list(_fields(model))
    if not fields:
        return data
    message, descriptor = fields[which % len(fields)]
    try:
        _mutate(message, descriptor, choice)
    except (UnicodeDecodeError, ValueError, TypeError):
        return data   # (a string field whose bytes are not UTF-8: protobuf will not hand it over)
    return model.SerializeToString()


def _mutate(message, F, choice: int) -> None:
    if _repeated(F):
        values = getattr(message, F.name)
        if len(values):
            if choice % 2:
                del values[choice % len(values)]
            elif F.type == F.TYPE_MESSAGE:
                values.add().CopyFrom(values[choice % len(values)])
            else:
                values.append(values[choice % len(values)])
    elif F.type == F.TYPE_MESSAGE:
        message.ClearField(F.name)
    elif F.type in (F.TYPE_STRING, F.TYPE_BYTES):
        text = ODD_STRINGS[choice % len(ODD_STRINGS)]
        setattr(message, F.name, text if F.type == F.TYPE_STRING else text.encode())
    elif F.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        setattr(message, F.name, ODD_FLOATS[choice % len(ODD_FLOATS)])
    else:
        value = ODD_INTS[choice % len(ODD_INTS)]
        if F.type in (F.TYPE_INT32, F.TYPE_ENUM):
            value = max(min(value, (1 << 31) - 1), -(1 << 31))
        elif F.type in (F.TYPE_UINT64,):
            value = abs(value) % (1 << 64)
        setattr(message, F.name, value)


def _repeated(descriptor) -> bool:
    # (protobuf 7 dropped FieldDescriptor.label for is_repeated)
    if hasattr(descriptor, "is_repeated"):
        return descriptor.is_repeated
    return descriptor.label == descriptor.LABEL_REPEATED


def _fields(message):
    """(message, field descriptor) for every set field of ``message`` and its sub-messages."""
    for descriptor, value in message.ListFields():
        yield message, descriptor
        if descriptor.type == descriptor.TYPE_MESSAGE:
            items = value if _repeated(descriptor) else [value]
            for item in items:
                yield from _fields(item)


# --- one mutant ----------------------------------------------------------------------------------

def zeros_feed(sess) -> Optional[dict[str, Any]]:
    """Zeros for every input (symbolic dims 1); None when an input is not a plain tensor or too big."""
    from onnxc.compiler import dtypes as dt
    feed = {}
    for arg in sess.get_inputs():
        if not arg.type.startswith("tensor("):
            return None
        shape = [d if isinstance(d, int) and d >= 0 else 1 for d in arg.shape]
        if np.prod(shape, dtype=float) > MAX_FEED_ELEMENTS:
            return None
        dtype = dt.by_name(arg.type[len("tensor("):-1]).np
        feed[arg.name] = np.zeros(shape, dtype=dtype) if dtype.kind not in "OUS" else np.full(shape, "", object)
    return feed


def try_input(data: bytes) -> str:
    """Load one mutant and run it once on zeros; its outcome (see ``outcome_class``). An
    exception that is not onnxc's propagates."""
    import onnxc
    from onnxc import InvalidArgument, OnnxcError, RuntimeFailure
    options = onnxc.SessionOptions()
    # (basic passes on one thread: the same frontend and runtime, C that builds in a second or
    # two instead of ten; what a campaign mostly reaches is the loader's validation anyway)
    options.graph_optimization_level = onnxc.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.intra_op_num_threads = 1
    try:
        sess = onnxc.InferenceSession(data, options)
    except OnnxcError as e:
        return outcome_class("refused", e)
    feed = zeros_feed(sess)
    if feed is None:
        return "loaded, not run"
    # A run may take as long as the model says (a Loop whose trip count a mutation made 10^17):
    # past RUN_SECONDS it is stopped as onnxruntime's users stop one, with RunOptions.terminate,
    # and a run that does not stop then is a hang.
    stop = onnxc.RunOptions()
    watchdog = threading.Timer(RUN_SECONDS, lambda: setattr(stop, "terminate", True))
    watchdog.start()
    try:
        sess.run(None, feed, stop)
    except (RuntimeFailure, InvalidArgument) as e:
        return "run stopped after the time limit" if stop.terminate else outcome_class("run failed", e)
    finally:
        watchdog.cancel()
    return "ran"


def outcome_class(stage: str, error: Exception) -> str:
    """``stage: ExceptionType: start of the message`` with numbers and quoted names replaced,
    so that one class stands for every mutant refused for one reason (the start names the
    node or check that refused it, the rest names the values)."""
    line = (str(error).splitlines() or [""])[0]
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", line)
    line = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", line)
    return f"{stage}: {type(error).__name__}: {line[:MESSAGE_CHARACTERS]}"


def coarse(outcome: str) -> str:
    """The outcome without its message: what a campaign's counts are kept by."""
    return ": ".join(outcome.split(": ")[:2])


def random_mutations(rng: random.Random, n_seeds: int) -> list[tuple]:
    """One to three mutations drawn from ``rng``, of the kinds ``mutate`` applies."""
    ops = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(MUTATION_KINDS)
        position = rng.randint(0, MAX_POSITION)
        if kind == "flip":
            ops.append((kind, position, rng.randint(1, 255)))
        elif kind == "truncate":
            ops.append((kind, position))
        elif kind == "insert":
            ops.append((kind, position, rng.randbytes(rng.randint(1, 8))))
        elif kind == "delete":
            ops.append((kind, position, rng.randint(1, 16)))
        elif kind == "splice":
            ops.append((kind, rng.randrange(n_seeds), position, rng.randint(0, MAX_POSITION), rng.randint(1, 64)))
        else:
            ops.append((kind, position, rng.randint(0, 1 << 10)))
    return ops
