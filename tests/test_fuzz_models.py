"""Fuzzing: mutated bytes of small real models never crash, hang or escape onnxc's exceptions.

Each input is one of three seed models (a tiny CNN, an MLP, a model with If and Loop), its
serialized bytes mutated by hypothesis: bytes flipped, inserted or deleted, the tail cut,
spans spliced from another seed, or one protobuf field set to an odd value (a huge or
negative int, a name of another value, a path out of the folder, a message cleared or
duplicated). ``onnxc.InferenceSession`` must then load the model or raise an OnnxcError;
a loaded model runs once on zeros and may raise RuntimeFailure or InvalidArgument.

The campaign runs in a child process (this file run as a script), so a crash of the compiled
code fails the test instead of the test run; before each input the child writes it to
``current.bin``, which the test keeps and prints when the child dies or hangs. CI's campaign
lasts 40 seconds; `python -m pytest -m fuzz tests/test_fuzz_models.py` adds one of
ONNXC_FUZZ_SECONDS seconds (default 1,200).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

DEFAULT_SECONDS = 40.0
LONG_SECONDS = 1200.0
# Larger zero inputs are not fed (the run is skipped): a mutated dim may ask for gigabytes.
MAX_FEED_ELEMENTS = 1 << 20
# The child's address space: a mutated model that makes generated code allocate wildly gets
# NULL from malloc (a RuntimeFailure), not the machine's memory.
MEMORY_LIMIT_BYTES = 16 << 30


# --- seed models ---------------------------------------------------------------------------------

def tiny_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (4, 1, 3, 3)), ("b1", (4,)), ("w2", (3, 16)), ("b2", (3,)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 1, 4, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 3])], inits)
    return _model(graph, 13)


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (6, 8)), ("b1", (8,)), ("w2", (8, 2)))]
    inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "shape"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["a"]),
             helper.make_node("Tanh", ["a"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["l"]),
             helper.make_node("Reshape", ["l", "shape"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 2])], inits)
    return _model(graph, 17)


def control_flow() -> onnx.ModelProto:
    """y = x * 2 if sum(x) > 0 else -x; then a Loop adds 1 to it n times."""
    double = helper.make_graph([helper.make_node("Add", ["x", "x"], ["d"])], "then", [],
                               [helper.make_tensor_value_info("d", T.FLOAT, [3])])
    negate = helper.make_graph([helper.make_node("Neg", ["x"], ["m"])], "else", [],
                               [helper.make_tensor_value_info("m", T.FLOAT, [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Add", ["acc", "one"], ["acc_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
                 helper.make_tensor_value_info("acc", T.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["v"], then_branch=double, else_branch=negate),
             helper.make_node("Loop", ["n", "", "v"], ["y"], body=body)]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero"), numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(3, np.int64), "n")]
    graph = helper.make_graph(nodes, "flow", [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3])], inits)
    return _model(graph, 17)


def _model(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


SEEDS = {"tiny_cnn": tiny_cnn, "mlp": mlp, "control_flow": control_flow}


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
    F = descriptor
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
        try:
            setattr(message, F.name, value)
        except (ValueError, TypeError):
            return data
    return model.SerializeToString()


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


# --- the campaign (in the child process) ---------------------------------------------------------

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


def try_input(data: bytes, stats: dict[str, int]) -> None:
    """One input: every outcome but an unexpected exception is counted; that one propagates."""
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
        key = f"refused: {type(e).__name__}"
        stats[key] = stats.get(key, 0) + 1
        return
    stats["loaded"] = stats.get("loaded", 0) + 1
    feed = zeros_feed(sess)
    if feed is None:
        return
    try:
        sess.run(None, feed)
        stats["ran"] = stats.get("ran", 0) + 1
    except (RuntimeFailure, InvalidArgument) as e:
        key = f"run failed: {type(e).__name__}"
        stats[key] = stats.get(key, 0) + 1


def campaign(seconds: float, out: Path) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    seeds = {name: build().SerializeToString() for name, build in SEEDS.items()}
    stats: dict[str, int] = {"tried": 0}
    position = st.integers(0, 1 << 16)
    mutation = st.one_of(
        st.tuples(st.just("flip"), position, st.integers(1, 255)),
        st.tuples(st.just("truncate"), position),
        st.tuples(st.just("insert"), position, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), position, st.integers(1, 16)),
        st.tuples(st.just("splice"), st.integers(0, 2), position, position, st.integers(1, 64)),
        st.tuples(st.just("field"), position, st.integers(0, 1 << 10)),
        st.tuples(st.just("field"), position, st.integers(0, 1 << 10)),   # (twice as likely: they parse)
    )
    end = time.monotonic() + seconds

    @settings(max_examples=20, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(seed=st.sampled_from(sorted(seeds)), ops=st.lists(mutation, min_size=1, max_size=3))
    def one_input(seed: str, ops: list) -> None:
        if time.monotonic() > end:
            return
        data = mutate(seeds[seed], ops, seeds)
        (out / "current.bin").write_bytes(data)
        stats["tried"] += 1
        try:
            try_input(data, stats)
        except BaseException:
            (out / "failure.bin").write_bytes(data)
            (out / "failure.txt").write_text(f"seed {seed}, mutations {ops!r}\n{traceback.format_exc()}")
            raise

    while time.monotonic() < end:
        one_input()
    return stats


def main() -> None:
    import logging
    import resource
    import warnings
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    warnings.simplefilter("ignore")
    logging.getLogger("onnxc").setLevel(logging.CRITICAL)
    stats = campaign(args.seconds, args.out)
    print("FUZZ-STATS " + json.dumps(stats))


# --- the test ------------------------------------------------------------------------------------

@pytest.mark.fuzz
@pytest.mark.parametrize("seconds", [pytest.param(DEFAULT_SECONDS, marks=pytest.mark.ci_slice),
                                     float(os.environ.get("ONNXC_FUZZ_SECONDS", LONG_SECONDS))])
def test_mutated_models_load_or_raise_onnxc_errors(seconds, tmp_path, capsys):
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, __file__, "--seconds", str(seconds), "--out", str(tmp_path)],
                              capture_output=True, text=True, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the campaign hung on the input kept in {tmp_path / 'current.bin'}: "
                             f"{_hex(tmp_path / 'current.bin')}") from None
    if proc.returncode != 0:
        kept = tmp_path / ("failure.bin" if (tmp_path / "failure.bin").exists() else "current.bin")
        detail = (tmp_path / "failure.txt").read_text() if (tmp_path / "failure.txt").exists() else proc.stderr[-3000:]
        raise AssertionError(f"the campaign failed (exit status {proc.returncode}) on the input kept in {kept}: "
                             f"{_hex(kept)}\n{detail}")
    stats = json.loads(proc.stdout.rsplit("FUZZ-STATS ", 1)[1])
    with capsys.disabled():
        print(f"\nfuzz: {stats['tried']} mutated models in {time.monotonic() - started:.0f} s: {stats}")
    assert stats["tried"] > 0


def _hex(path: Path) -> str:
    return path.read_bytes().hex() if path.exists() else "(none written)"


def test_mutations_change_the_model():
    # the campaign is only as good as its mutations: each kind must produce other bytes
    seeds = {name: build().SerializeToString() for name, build in SEEDS.items()}
    data = seeds["control_flow"]
    rng = random.Random(0)
    for op in [("flip", 10, 1), ("truncate", 100), ("insert", 5, b"\xff"), ("delete", 5, 3),
               ("splice", 0, 3, 40, 20), ("field", rng.randrange(1000), 3)]:
        assert mutate(data, [op], seeds) != data, op
    changed = {mutate_field(data, which, 1) for which in range(200)}
    assert len(changed) > 50


if __name__ == "__main__":
    main()
