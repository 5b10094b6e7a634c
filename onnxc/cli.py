"""The ``onnxc`` command line: compile, run, info, ops."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Optional, Sequence

import numpy as np


def _compile(args: argparse.Namespace) -> int:
    from .driver import CompileOptions, compile_model
    options = CompileOptions(optimization_level=args.opt_level, opt=args.cflags_opt,
                             march="" if args.portable else args.march, prefix=args.name)
    start = time.perf_counter()
    manifest = compile_model(args.model, args.output, options, command=args.command_line)
    took = time.perf_counter() - start
    print(f"compiled {args.model} -> {args.output} in {took:.2f}s "
          f"({manifest['functions']} node functions, arena {manifest['arena_bytes']} bytes)")
    return 0


def _random_feed(sess) -> dict[str, np.ndarray]:
    from .compiler import dtypes as dt
    rng = np.random.default_rng(0)
    feed = {}
    for arg in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
        dtype = dt.by_name(arg.type[len("tensor("):-1])
        if dtype.is_float:
            feed[arg.name] = rng.standard_normal(shape).astype(dtype.np)
        elif dtype.kind == "bool":
            feed[arg.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feed[arg.name] = rng.integers(0, 10, shape).astype(dtype.np)
    return feed


def _run(args: argparse.Namespace) -> int:
    from .runtime.session import InferenceSession
    sess = InferenceSession(args.model)
    feed = _random_feed(sess)
    for item in args.input or []:
        name, _, path = item.partition("=")
        feed[name] = np.load(path)
    start = time.perf_counter()
    outputs = sess.run(None, feed)
    took = time.perf_counter() - start
    for arg, out in zip(sess.get_outputs(), outputs):
        print(f"{arg.name}: {arg.type} shape={list(out.shape)} "
              f"mean={float(np.mean(out.astype(np.float64))) if out.size else 0.0:.6g}")
    print(f"ran in {took * 1e3:.2f} ms")
    return 0


def _model_info(path: str) -> int:
    """Every op a model uses (bodies included), with node counts and whether onnxc supports it."""
    import onnx

    from .compiler.errors import ModelError
    from .compiler.frontend import is_supported, op_inventory, opset_map
    try:  # no checker: a model with operators nobody registered is exactly what this reports on
        model = onnx.load(path, load_external_data=True)
    except Exception as e:
        raise ModelError(f"cannot load {path}: {e}") from e
    opsets = opset_map(model)
    print(f"model: {path}")
    print(f"producer: {model.producer_name} {model.producer_version}".rstrip())
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(opsets.items())))
    for what, values in (("input", model.graph.input), ("output", model.graph.output)):
        inits = {i.name for i in model.graph.initializer}
        for vi in values:
            if vi.name not in inits:
                print(f"{what}: {vi.name!r} {_type_text(vi.type)}")
    inventory = op_inventory(model, opsets)
    missing = [key for key in inventory if not is_supported(*key)]
    print(f"operators: {len(inventory)} kinds, {sum(len(v) for v in inventory.values())} nodes")
    for key in sorted(inventory):
        domain, op, opset = key
        mark = "ok" if key not in missing else "NOT SUPPORTED"
        print(f"  {domain or 'ai.onnx'}::{op} (opset {opset}): {len(inventory[key])} node(s)  {mark}")
    if missing:
        print(f"{len(missing)} operator(s) not supported: " + ", ".join(
            f"{d or 'ai.onnx'}::{o}" for d, o, _ in sorted(missing)))
        return 2
    print("every operator is supported")
    return 0


def _type_text(tp) -> str:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        from onnx import TensorProto
        elem = TensorProto.DataType.Name(tp.tensor_type.elem_type).lower()
        if not tp.tensor_type.HasField("shape"):
            return f"{elem}[?]"
        dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tp.tensor_type.shape.dim]
        return f"{elem}[{', '.join(dims)}]"
    if which == "sequence_type":
        return f"seq({_type_text(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({_type_text(tp.optional_type.elem_type)})"
    return which or "?"


def _info(args: argparse.Namespace) -> int:
    import os
    from .runtime.loader import read_manifest
    if not os.path.isdir(args.artifact):
        return _model_info(args.artifact)
    manifest = read_manifest(args.artifact)
    print(json.dumps({k: manifest[k] for k in ("onnxc_version", "inputs", "outputs", "arena_bytes",
                                                "functions", "toolchain")}, indent=2))
    return 0


def _ops(args: argparse.Namespace) -> int:
    from .compiler.ops.registry import MAX_OPSET, supported_ops
    for domain, op, since, until in supported_ops():
        upto = "" if until == MAX_OPSET else str(until)
        print(f"{domain or 'ai.onnx'}::{op} opset {since}-{upto}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import __version__
    from .compiler.errors import OnnxcError
    parser = argparse.ArgumentParser(prog="onnxc", description="Ahead-of-time compiler for ONNX models.")
    parser.add_argument("--version", action="version", version=f"onnxc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compile", help="compile a model into an artifact folder")
    p.add_argument("model")
    p.add_argument("-o", "--output", default="build/model")
    p.add_argument("-O", "--opt-level", type=int, default=99, help="graph optimization level: 0, 1, 2 or 99")
    p.add_argument("--cflags-opt", default="-O3", help="C optimization flag (default -O3)")
    p.add_argument("--march", default="native", help="target CPU for -march (default native)")
    p.add_argument("--portable", action="store_true", help="no -march flag: runs on any CPU of the arch")
    p.add_argument("--name", default="model", help="prefix of the generated C API symbols")
    p.set_defaults(func=_compile)

    p = sub.add_parser("run", help="run a model or artifact on random (or given .npy) inputs")
    p.add_argument("model")
    p.add_argument("--input", action="append", help="NAME=file.npy")
    p.set_defaults(func=_run)

    p = sub.add_parser("info", help="a model's operators (and which are unsupported) or an artifact's manifest")
    p.add_argument("artifact", help="a .onnx model or an artifact folder")
    p.set_defaults(func=_info)

    p = sub.add_parser("ops", help="list supported operators")
    p.set_defaults(func=_ops)

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.command_line = " ".join(["onnxc"] + [shlex.quote(a) for a in argv])
    try:
        return args.func(args)
    except OnnxcError as e:
        print(f"onnxc: error: {e}", file=sys.stderr)
        return 1
