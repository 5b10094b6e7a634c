"""The ``onnxc`` command line: compile, run, verify, bench, profile, info, cache, ops, completion."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import json
import os
import re
import shlex
import sys
import time
from typing import Any, Optional, Sequence

import numpy as np

from ._cli_completion import SHELLS
from ._cli_data import (CliError, build_feed, compare, describe, ensure_dir, format_error, input_specs,
                        parse_dims, read_inputs, save_outputs, summary)

EXIT_OK, EXIT_ERROR, EXIT_UNSUPPORTED, EXIT_NO_REFERENCE = 0, 1, 2, 3
LOG_LEVELS = ("debug", "info", "warning", "error")

EXIT_CODES = """\
exit status:
  0  success (verify: every output matches)
  1  error (bad arguments, unreadable files, compile or run failures), or a failed check
     (verify: an output does not match onnxruntime)
  2  the model uses operators onnxc does not support (info lists them; the other
     commands exit 2 too when a model cannot be compiled for that reason)
  3  the reference runtime (onnxruntime) is not installed (verify)"""

INPUT_HELP = ("an input: NAME=FILE.npy, NAME=FILE.pb (a serialized TensorProto; SequenceProto or "
              "OptionalProto for such inputs), FILE.npz (arrays keyed by input name) or FILE.pb "
              "(a TensorProto named after its input); repeat for several. Inputs not given are random")


class _Formatter(argparse.HelpFormatter):
    """Wraps one-line paragraphs (descriptions); keeps paragraphs with line breaks as written
    (examples, exit codes)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap
        return "\n\n".join(textwrap.indent(p, indent) if "\n" in p else
                            textwrap.fill(p, width, initial_indent=indent, subsequent_indent=indent)
                            for p in text.split("\n\n"))


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 (2 means unsupported operators here)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _say(args: argparse.Namespace, text: str = "") -> None:
    if not getattr(args, "quiet", False):
        print(text)


# --- compile ----------------------------------------------------------------------------------

def _compile(args: argparse.Namespace) -> int:
    from ._progress import CompileProgress, stderr_is_tty
    from .driver import CompileOptions, compile_cached, compile_model
    from .runtime.options import usable_cores
    from .runtime.session import min_threaded_work
    if not os.path.isfile(args.model):
        raise CliError(f"model file not found: {args.model}")
    from .compiler.passes.pipeline import LOWERINGS, PIPELINE
    known = sorted({name for name, _, level in PIPELINE if level > 0} | set(LOWERINGS))
    for name in args.disable or ():
        if name not in known:
            raise CliError(f"--disable {name}: not an optimization onnxc has ({', '.join(known)})")
    if args.weights == "bin" and args.target != "c":
        raise CliError("--weights bin needs --target c")
    if args.requantize == "fixed-point" and args.target == "cuda":
        raise CliError("--requantize fixed-point: not with --target cuda")
    if args.cmsis_nn and args.target != "c":
        raise CliError("--cmsis-nn needs --target c")
    if args.cmsis_nn and args.requantize == "float":
        raise CliError("--cmsis-nn requantizes in fixed point: it cannot be combined with --requantize float")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", args.name):
        raise CliError(f"--name {args.name!r}: a C identifier of at most 32 characters")
    if args.threads < 0:
        raise CliError("--threads must be >= 0")
    if args.threads > 1 and args.target in ("c", "cuda"):
        raise CliError(f"--threads: a --target {args.target} build runs on one host thread")
    archs = _cuda_archs(args)
    bounds: dict[str, int] = {}
    dims = tuple(sorted(("name", name, size) for name, size in parse_dims(args.dim, bounds).items()))
    _check_dim_names(args.model, [name for _, name, _ in dims] + list(bounds))
    _check_output_folder(args.output, "package" if args.target == "c" else "artifact", args.force)
    if bounds and args.target != "c":
        raise CliError("--dim NAME<=MAX needs --target c (an artifact for this machine takes any size)")
    # (threads 0: one per usable core, as an InferenceSession's default, so that the commands
    # that open the model later find this build in the cache)
    threads = 1 if args.target in ("c", "cuda") else args.threads or usable_cores()
    options = CompileOptions(optimization_level=args.opt_level, opt=args.cflags_opt,
                             march="" if args.portable or args.target == "c" else args.march, prefix=args.name,
                             disabled_passes=tuple(sorted(set(args.disable or ()))), dim_overrides=dims,
                             dim_bounds=tuple(sorted(bounds.items())), target=args.target, weights=args.weights,
                             threads=threads, cmsis_nn=args.cmsis_nn,
                             requantize=(args.requantize or "float").replace("-", "_"), precision=args.precision,
                             min_threaded_work=min_threaded_work({}))   # (a session's default)
    if args.target == "cuda":
        from .runtime import cuda
        # (the options a session with the CUDA provider's defaults asks for: it finds this build)
        options = dataclasses.replace(options, cuda_archs=archs, cuda_emulate=cuda.emulated())
    shown = not args.quiet and (args.progress or stderr_is_tty())
    progress = CompileProgress(sys.stderr if shown else None, live=stderr_is_tty())
    try:
        if args.target == "c":
            manifest = compile_model(args.model, args.output, options, command=args.command_line, on_stage=progress)
            built = True
        else:
            folder, built = compile_cached(args.model, options, on_stage=progress, command=args.command_line)
            manifest = _copy_artifact(folder, args.output)
    except Exception as e:
        with contextlib.suppress(AttributeError, TypeError):
            e.stage = progress.stage   # type: ignore[attr-defined]   (main() names it)
        raise
    finally:
        progress.close()
    took = progress.total()
    if shown and built:
        print(progress.summary(), file=sys.stderr)
    if args.target == "c":
        code = manifest["code_bytes"]   # ("n/a" where it was not measured)
        _say(args, f"wrote the C package {args.output} in {took:.2f}s (arena {human_size(manifest['arena_bytes'])}, "
                   f"weights {human_size(manifest['weights_bytes'])}, "
                   f"code {human_size(code) if isinstance(code, int) else code} on this host)")
        return EXIT_OK
    if manifest.get("specialise"):
        # (no library yet: a session compiles one per input signature, as `onnxc info` says)
        _say(args, f"wrote {args.model} -> {args.output} in {took:.2f}s, compiled per input signature when it "
                   f"runs: {manifest['specialise']}")
        return EXIT_OK
    how = "compiled" if built else "found in the cache"
    _say(args, f"{how} {args.model} -> {args.output} in {took:.2f}s "
               f"({manifest['functions']} node functions, arena {human_size(manifest['arena_bytes'])})")
    return EXIT_OK


def _cuda_archs(args: argparse.Namespace) -> tuple[str, ...]:
    """--cuda-arch checked (with --target cuda only); without it the GPU's own architecture, or
    sm_80 and sm_90 on a machine without one."""
    from .runtime import cuda
    if args.cuda_arch is None:
        return cuda.archs(0)
    if args.target != "cuda":
        raise CliError("--cuda-arch needs --target cuda")
    try:
        return cuda.check_archs([a.strip() for a in args.cuda_arch.split(",") if a.strip()])
    except ValueError as e:
        raise CliError(f"--cuda-arch {args.cuda_arch!r}: {e}") from None


def _copy_artifact(folder: str, output: str) -> dict[str, Any]:
    """Copies a cached artifact into ``output`` (replacing the files of an earlier artifact there);
    returns its manifest."""
    import shutil

    from .driver import _write_atomic
    os.makedirs(output, exist_ok=True)
    for name in os.listdir(output):   # (an earlier build's units, which this one may not have)
        if re.fullmatch(r"model_nodes_\d+\.c|model_common\.h", name):
            os.unlink(os.path.join(output, name))
    for name in sorted(os.listdir(folder)):
        if not name.startswith("."):
            with open(os.path.join(folder, name), "rb") as f:
                _write_atomic(os.path.join(output, name), f.read())
            shutil.copymode(os.path.join(folder, name), os.path.join(output, name))
    with open(os.path.join(output, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _check_dim_names(model: str, names: Sequence[str]) -> None:
    """Every --dim names a dynamic input dim of the model (its own names, or <input>_dim<axis>
    for one it leaves unnamed)."""
    if not names:
        return
    import onnx

    from .compiler.frontend import input_dim_names
    try:
        valid = input_dim_names(onnx.load(model, load_external_data=False))
    except Exception:  # noqa: BLE001 - an unreadable model: compiling it reports why
        return
    for name in names:
        if name not in valid:
            known = ", ".join(valid) if valid else "none: every input dim is fixed"
            raise CliError(f"--dim {name}: the model has no input dim of that name (its dims: {known})")


# What each kind of compile output holds; a folder with one of these is that kind. A package's
# files are named after its prefix (kws.c, kws.h, kws_weights.c, kws_demo.c), hence the patterns.
_OUTPUT_FILES = {"artifact": ("manifest.json", "libmodel.so", "weights.bin", "model.c", "model.cu", "model.h",
                              "model_common.h", "model_nodes_*.c"),
                 "package": ("Makefile", "CMakeLists.txt", "README.md", "*.c", "*.h", "*_weights.bin")}
_OUTPUT_NAMES = {"artifact": "an onnxc artifact (manifest.json)", "package": "a C package (Makefile, CMakeLists.txt)"}


def _folder_kind(folder: str) -> Optional[str]:
    """What an existing folder holds: "artifact", "package", "other" (files onnxc did not
    write), or None when it is missing or empty."""
    try:
        entries = [e for e in os.listdir(folder) if not e.startswith(".")]
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return "other"
    if not entries:
        return None
    if "manifest.json" in entries:
        return "artifact"
    if "Makefile" in entries and "CMakeLists.txt" in entries and any(e.endswith("_demo.c") for e in entries):
        return "package"
    return "other"


def _check_output_folder(folder: str, kind: str, force: bool) -> None:
    """-o must be new, empty or an earlier output of the same kind; --force writes over
    anything, removing the other kind's files so the folder is one thing."""
    found = _folder_kind(folder)
    if found is None or found == kind:
        return
    if not force:
        what = _OUTPUT_NAMES.get(found, "files onnxc did not write")
        raise CliError(f"-o {folder}: the folder holds {what}, not {_OUTPUT_NAMES[kind]}: give another folder, "
                       "or --force to write over it")
    if os.path.isdir(folder) and found in _OUTPUT_FILES:
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if any(fnmatch.fnmatchcase(name, p) for p in _OUTPUT_FILES[found]) and os.path.isfile(path):
                os.unlink(path)


def human_size(n: int) -> str:
    """A byte count as people read it: 512 B, 3.0 KiB, 1.5 MiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# --- shared by run, verify and bench -------------------------------------------------------------

# --log-level as onnxruntime's session severities
_SEVERITY = {"debug": 0, "info": 1, "warning": 2, "error": 3}


def _session(model: str, opt_level: int, threads: int = 0, log_level: Optional[str] = None):
    from .runtime.options import SessionOptions
    from .runtime.session import InferenceSession
    if not os.path.exists(model):
        raise CliError(f"model not found: {model}")
    options = SessionOptions()
    options.log_severity_level = _SEVERITY[log_level or "warning"]
    options.graph_optimization_level = opt_level
    options.intra_op_num_threads = threads
    return InferenceSession(model, options)


def _feed(sess, args: argparse.Namespace, notes: list[str]) -> tuple[dict[str, Any], list[str]]:
    from .runtime.loader import read_manifest
    specs = input_specs(read_manifest(sess.artifact_dir))
    given = read_inputs(args.input, specs, notes)
    return build_feed(specs, given, parse_dims(args.dim), args.seed, notes)


def _reference_runtime():
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def _reference_session(ort, model: str, threads: Optional[int]):
    if os.path.isdir(model):
        raise CliError(f"{model} is an artifact folder: onnxruntime needs the .onnx model "
                       f"(give the model, and the artifact with --artifact)")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads is not None:  # 0: onnxruntime's default
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise CliError(f"onnxruntime cannot load {model}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _reference_feed(feed: dict[str, Any]) -> dict[str, Any]:
    """onnxruntime takes string tensors as object arrays and sequences as lists, as onnxc does."""
    return {k: (v.astype(object) if isinstance(v, np.ndarray) and v.dtype.kind in "US" else v)
            for k, v in feed.items()}


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--input", action="append", metavar="[NAME=]FILE", help=INPUT_HELP)
    p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                   help="size of a symbolic dim in random inputs (default 1); repeat for several")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("-O", "--opt-level", type=int, default=99, choices=(0, 1, 2, 99),
                   help="onnxc graph optimization level when compiling a .onnx (default 99)")


# --- run ----------------------------------------------------------------------------------------------

def _run(args: argparse.Namespace) -> int:
    if args.output_dir:
        ensure_dir(args.output_dir)
    sess = _session(args.model, args.opt_level, log_level=args.log_level)
    notes: list[str] = []
    feed, lines = _feed(sess, args, notes)
    for line in lines:
        print("input " + line)
    for note in notes:
        print("note: " + note)
    start = time.perf_counter()
    outputs = sess.run(None, feed)
    took = time.perf_counter() - start
    names = [o.name for o in sess.get_outputs()]
    for arg, out in zip(sess.get_outputs(), outputs):
        print(f"output {arg.name}: {arg.type} {describe(out)} {summary(out)}".rstrip())
    print(f"ran in {took * 1e3:.2f} ms")
    if args.output_dir:
        for line in save_outputs(args.output_dir, names, outputs):
            print("saved " + line)
    return EXIT_OK


# --- verify ---------------------------------------------------------------------------------------------

def _verify(args: argparse.Namespace) -> int:
    ort = _reference_runtime()
    if ort is None:
        print("onnxc: onnxruntime is not installed: verify compares with it "
              "(pip install onnxruntime)", file=sys.stderr)
        return EXIT_NO_REFERENCE
    if not os.path.isfile(args.model):
        if os.path.isdir(args.model):
            raise CliError(f"{args.model} is an artifact folder: verify needs the .onnx model "
                           "(give the artifact with --artifact)")
        raise CliError(f"model file not found: {args.model}")
    if args.rtol < 0 or args.atol < 0:
        raise CliError("--rtol and --atol must be >= 0")
    sess = _session(args.artifact or args.model, args.opt_level, log_level=args.log_level)
    reference = _reference_session(ort, args.model, None)
    notes: list[str] = []
    feed, lines = _feed(sess, args, notes)
    for line in lines:
        print("input " + line)
    for note in notes:
        print("note: " + note)
    actual = sess.run(None, feed)
    try:
        expected = reference.run(None, _reference_feed(feed))
    except Exception as e:
        raise CliError(f"onnxruntime failed to run the model: {_first_line(e)}") from None
    names = [o.name for o in sess.get_outputs()]
    ref_names = [o.name for o in reference.get_outputs()]
    if names != ref_names:
        raise CliError(f"the outputs differ: onnxc {names}, onnxruntime {ref_names}")
    rows = []
    failed = 0
    for name, a, e in zip(names, actual, expected):
        c = compare(a, e, args.rtol, args.atol)
        failed += not c.ok
        rows.append([name, describe(a), format_error(c.max_abs), format_error(c.max_rel),
                     "PASS" if c.ok else "FAIL", c.note])
    _table(["output", "onnxc", "max abs err", "max rel err", "result", "note"], rows)
    tol = f"rtol={args.rtol:g}, atol={args.atol:g}"
    if failed:
        print(f"FAIL: {failed} of {len(rows)} output(s) differ from onnxruntime ({tol})")
        return EXIT_ERROR
    print(f"PASS: {len(rows)} output(s) match onnxruntime ({tol})")
    return EXIT_OK


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


# --- bench ------------------------------------------------------------------------------------------------

def _time_runs(run, warmup: int, runs: int) -> np.ndarray:
    for _ in range(warmup):
        run()
    times = np.empty(runs)
    for k in range(runs):
        start = time.perf_counter()
        run()
        times[k] = time.perf_counter() - start
    return times * 1e3


def _bench(args: argparse.Namespace) -> int:
    if args.runs < 1 or args.warmup < 0:
        raise CliError("--runs must be >= 1 and --warmup >= 0")
    if args.threads < 0:
        raise CliError("--threads must be >= 0")
    ort = None if args.no_reference else _reference_runtime()
    if ort is None and not args.no_reference:
        print("note: onnxruntime is not installed: timing onnxc alone")
    onnx_model = args.model if os.path.isfile(args.model) else None
    if ort is not None and onnx_model is None:
        print("note: an artifact folder has no .onnx model for onnxruntime: timing onnxc alone "
              "(give the model, and the artifact with --artifact)")
        ort = None
    sess = _session(args.artifact or args.model, args.opt_level, args.threads, args.log_level)
    reference = _reference_session(ort, onnx_model, args.threads) if ort is not None else None
    notes: list[str] = []
    feed, lines = _feed(sess, args, notes)
    for line in lines:
        print("input " + line)
    for note in notes:
        print("note: " + note)
    results = [("onnxc", _time_runs(lambda: sess.run(None, feed), args.warmup, args.runs))]
    if reference is not None:
        ref_feed = _reference_feed(feed)
        try:
            results.append(("onnxruntime", _time_runs(lambda: reference.run(None, ref_feed), args.warmup,
                                                      args.runs)))
        except Exception as e:
            raise CliError(f"onnxruntime failed to run the model: {_first_line(e)}") from None
    threads = f"{args.threads} thread(s)" if args.threads else "one thread per core"
    print(f"{args.runs} timed run(s) after {args.warmup} warmup run(s); onnxc: intra_op_num_threads={args.threads} "
          f"({threads})")
    if reference is not None:
        threads = (f"intra_op_num_threads={args.threads}" if args.threads
                   else "intra_op_num_threads=0 (its default: one per core)")
        fair = " for a single-thread comparison" if args.threads == 1 else ""
        print(f"onnxruntime: CPUExecutionProvider, {threads}, inter_op_num_threads=1{fair} (--threads)")
    stats = {name: (float(t.min()), float(np.median(t)), float(np.percentile(t, 90))) for name, t in results}
    rows = [[name, *(f"{v:.3f}" for v in values)] for name, values in stats.items()]
    if reference is not None:
        rows.append(["onnxc/onnxruntime", *(f"{a / b:.2f}" if b > 0 else "-"
                                            for a, b in zip(stats["onnxc"], stats["onnxruntime"]))])
    _table(["", "min ms", "median ms", "p90 ms"], rows)
    return EXIT_OK


# --- profile ----------------------------------------------------------------------------------------------

def _profile(args: argparse.Namespace) -> int:
    """Compile with profiling, run, write onnxruntime's Chrome trace and summarise it."""
    import json

    from .runtime.options import SessionOptions
    from .runtime.session import InferenceSession
    if args.runs < 1:
        raise CliError("--runs must be >= 1")
    if not os.path.isfile(args.model):
        raise CliError(f"model not found: {args.model} (profile needs the .onnx model)")
    options = SessionOptions()
    options.enable_profiling = True
    options.log_severity_level = _SEVERITY[args.log_level or "warning"]
    options.profile_file_prefix = args.prefix
    options.graph_optimization_level = args.opt_level
    sess = InferenceSession(args.model, options)
    notes: list[str] = []
    feed, _ = _feed(sess, args, notes)
    for note in notes:
        print("note: " + note)
    for _ in range(args.runs):
        sess.run(None, feed)
    path = sess.end_profiling()
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    runs = [e for e in events if e.get("name") == "model_run"]
    nodes: dict[tuple[str, str, str], list[int]] = {}   # (node index, name, op) -> durations
    for e in events:
        if e.get("cat") == "Node":
            key = (e["args"]["node_index"], e["name"][:-len("_kernel_time")], e["args"]["op_name"])
            nodes.setdefault(key, []).append(e["dur"])
    total = sum(sum(d) for d in nodes.values()) or 1
    print(f"trace: {path} ({len(events)} events, {len(runs)} run(s))")
    if runs:
        print(f"model_run: mean {sum(e['dur'] for e in runs) / len(runs) / 1000:.3f} ms")
    ranked = sorted(nodes.items(), key=lambda kv: -sum(kv[1]))[:args.top]
    rows = [[name, op, str(len(d)), f"{sum(d) / len(d) / 1000:.3f}", f"{100 * sum(d) / total:.1f}"]
            for (_, name, op), d in ranked]
    print(f"top {len(rows)} node(s) by time:")
    _table(["node", "op", "calls", "mean ms", "% of node time"], rows)
    by_op: dict[str, int] = {}
    for (_, _, op), d in nodes.items():
        by_op[op] = by_op.get(op, 0) + sum(d)
    print("time by operator:")
    _table(["op", "% of node time"], [[op, f"{100 * t / total:.1f}"]
                                      for op, t in sorted(by_op.items(), key=lambda kv: -kv[1])])
    return EXIT_OK


# --- info and ops ----------------------------------------------------------------------------------------

def _model_info(path: str) -> int:
    """Every op a model uses (bodies included), with node counts and whether onnxc supports it."""
    import onnx

    from .compiler.errors import ModelError
    from .compiler.frontend import is_supported, op_inventory, opset_map
    try:
        model = onnx.load(path, load_external_data=True)
    except Exception as e:
        raise ModelError(f"cannot load {path}: {e}") from e
    try:
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001 - any checker failure
        # an operator no schema knows is what this command reports on; anything else is a broken model
        if "No Op registered" not in str(e) and "is deprecated in domain_version" not in str(e):
            raise ModelError(f"{path} is not a valid ONNX model: {_first_line(e)}") from None
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
        return EXIT_UNSUPPORTED
    print("every operator is supported")
    return EXIT_OK


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
    from .runtime.loader import read_manifest
    if not os.path.isdir(args.artifact):
        return _model_info(args.artifact)
    manifest = read_manifest(args.artifact)
    if args.json:
        print(json.dumps({k: manifest.get(k) for k in ("onnxc_version", "inputs", "outputs", "arena_bytes",
                                                        "functions", "toolchain", "options")}, indent=2))
        return EXIT_OK
    print(f"artifact: {args.artifact}")
    for line in describe_build(manifest):
        print(line)
    return EXIT_OK


_LEVEL_NAMES = {0: "0 (none)", 1: "1 (basic)", 2: "2 (extended)", 99: "99 (all)"}


def describe_build(manifest: dict[str, Any]) -> list[str]:
    """An artifact's manifest as lines people read: what it was built from, with which options
    (everything that decides the code) and for which CPU."""
    o = manifest.get("options") or {}
    meta = manifest.get("meta") or {}
    isa = manifest.get("isa") or []
    simd = ("AVX-512" if "avx512f" in isa else "AVX2" if {"avx2", "fma"} <= set(isa) else
            "NEON" if "neon" in isa else "portable C")
    lines = [f"built by: onnxc {manifest.get('onnxc_version', '?')} for the {manifest.get('device', 'cpu')}"
             + (f" from {manifest['source']}" if manifest.get("source") else "")]
    if meta.get("graph_name") is not None:
        lines.append(f"graph: {meta.get('graph_name')!r}" + (f" (from {meta['producer_name']})"
                                                               if meta.get("producer_name") else ""))
    if manifest.get("specialise"):
        lines.append(f"compiled per input signature when it runs: {manifest['specialise']}")
    inter = o.get("inter_threads", 0)
    lines += [
        f"intra-op threads: {o.get('threads', '?')}" + (f"; nodes of a level run together on {inter}"
                                                         if inter else ""),
        f"graph optimization level: {_LEVEL_NAMES.get(o.get('optimization_level'), o.get('optimization_level'))}",
        "disabled passes: " + (", ".join(o.get("disabled_passes") or ()) or "none"),
        "fixed dims: " + (", ".join(f"{key}={size}" + (" (denotation)" if kind == "denotation" else "")
                                    for kind, key, size in o.get("dim_overrides") or ()) or "none"),
        f"SIMD target: {simd} (-march={o.get('march') or 'none: portable'}; C {o.get('opt', '?')})",
        "precision: " + ("bf16 (GEMM and convolution products in bfloat16, float32 sums)"
                         if o.get("precision") == "bf16" else "fp32"),
        f"memory: {o.get('memory', '?')}" + (f" ({human_size(manifest['arena_bytes'])} arena)"
                                              if "arena_bytes" in manifest else ""),
    ]
    extras = [name for name, on in (("profiling", o.get("profile")), ("denormals as zero", o.get("denormal_as_zero")),
                                    ("custom ops", o.get("custom_ops")), ("initializers given", o.get("initializer_digests")))
              if on]
    if extras:
        lines.append("also: " + ", ".join(extras))
    for what in ("inputs", "outputs"):
        for v in manifest.get(what) or ():
            shape = ", ".join(str(d) if d is not None else "?" for d in v.get("shape") or ())
            lines.append(f"{what[:-1]}: {v.get('name')!r} {v.get('dtype', '?')}[{shape}]")
    if "functions" in manifest:
        lines.append(f"node functions: {manifest['functions']}")
    if manifest.get("toolchain"):
        lines.append(f"toolchain: {manifest['toolchain'].split('|')[0]}")
    return lines


# --- cache ------------------------------------------------------------------------------------------------

def _cache(args: argparse.Namespace) -> int:
    from .runtime import cache
    if args.action == "list":
        entries = cache.entries()
        rows = [[e.key, _entry_model(e.manifest), str((e.manifest.get("options") or {}).get("threads", "?")),
                 human_size(e.bytes), time.strftime("%Y-%m-%d %H:%M", time.localtime(e.used))] for e in entries]
        print(f"{cache.cache_root()}: {len(entries)} artifact(s), {human_size(sum(e.bytes for e in entries))}")
        if rows:
            _table(["key", "model", "threads", "size", "last used"], rows)
        return EXIT_OK
    if args.action == "info":
        if not args.key:
            raise CliError("cache info needs a KEY (see onnxc cache list)")
        matches = [e for e in cache.entries() if e.key.startswith(args.key)]
        if len(matches) != 1:
            raise CliError(f"cache info {args.key}: {'no' if not matches else 'more than one'} artifact has that key")
        print(f"artifact: {matches[0].folder}")
        for line in describe_build(matches[0].manifest):
            print(line)
        return EXIT_OK
    if args.older_than is not None and args.older_than < 0:
        raise CliError("--older-than must be >= 0")
    removed, freed = cache.clear(None if args.older_than is None else args.older_than * 86400.0)
    print(f"removed {removed} artifact(s), {human_size(freed)}")
    return EXIT_OK


def _entry_model(manifest: dict[str, Any]) -> str:
    """The model file an artifact was first built from, else its graph's name."""
    graph = (manifest.get("meta") or {}).get("graph_name")
    return manifest.get("source") or (f"graph {graph!r}" if graph else "?")


def _ops(args: argparse.Namespace) -> int:
    from .compiler.ops.registry import MAX_OPSET, supported_ops
    for domain, op, since, until in supported_ops():
        upto = "" if until == MAX_OPSET else str(until)
        print(f"{domain or 'ai.onnx'}::{op} opset {since}-{upto}")
    return EXIT_OK


# --- the parser -----------------------------------------------------------------------------------------

def _completion(args: argparse.Namespace) -> int:
    from ._cli_completion import script
    print(script(build_parser(), args.shell), end="")
    return EXIT_OK


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in lines)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    fmt = _Formatter
    parser = _Parser(
        prog="onnxc", formatter_class=fmt,
        description="Ahead-of-time compiler for ONNX models: generated C, built with the system C "
                    "compiler, run through an onnxruntime-compatible InferenceSession.",
        epilog=_examples("onnxc compile model.onnx -o build/model",
                         "onnxc run build/model --input x=x.npy --output-dir out",
                         "onnxc verify model.onnx",
                         "onnxc bench model.onnx --runs 100",
                         "onnxc profile model.onnx --top 5",
                         "onnxc info model.onnx",
                         "onnxc cache list",
                         "onnxc ops",
                         'eval "$(onnxc completion bash)"') + "\n\n" + EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"onnxc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    logs = argparse.ArgumentParser(add_help=False)
    group = logs.add_argument_group("logging")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="log onnxc's messages to stderr: -v info, -vv debug")
    group.add_argument("--log-level", choices=LOG_LEVELS, metavar="LEVEL",
                       help=f"log onnxc's messages at LEVEL and above to stderr ({', '.join(LOG_LEVELS)}); "
                            "default: warnings")

    p = sub.add_parser(
        "compile", parents=[logs], formatter_class=fmt, help="compile a model into an artifact folder",
        description="Compile an ONNX model into an artifact folder: model.c, model.h, libmodel.so, "
                    "weights.bin and manifest.json. onnxc.InferenceSession(FOLDER) and the other "
                    "commands load it without compiling. On a terminal the stages (load/check, "
                    "passes, codegen, C compile) are shown on stderr as they run; a one-line summary "
                    "goes to stdout.",
        epilog=_examples("onnxc compile model.onnx -o build/model",
                         "onnxc compile model.onnx -o build/model -O 1 --portable --quiet",
                         "onnxc compile model.onnx -o build/net --name net --cflags-opt -O2 --progress",
                         "onnxc compile model.onnx --target c --name kws --dim batch=1 -o build/kws",
                         "onnxc compile model.onnx --target cuda --cuda-arch sm_80,sm_90 -o build/model-cuda"))
    p.add_argument("model", help="the .onnx model")
    p.add_argument("-o", "--output", default="build/model", help="artifact folder (default build/model)")
    p.add_argument("-O", "--opt-level", type=int, default=99, choices=(0, 1, 2, 99),
                   help="graph optimization level: 0, 1, 2 or 99 (default 99)")
    p.add_argument("--disable", action="append", metavar="NAME",
                   help="skip this optimization pass or lowering choice (repeatable), e.g. "
                        "conv_winograd for im2col's rounding on 3x3 convolutions")
    p.add_argument("--cflags-opt", default="-O3", help="C optimization flag (default -O3; with it and GCC, the model's own "
                   "units are built at -O2 -fvect-cost-model=dynamic, the shared kernel helpers at -O3)")
    p.add_argument("--march", default="native", help="target CPU for -march (default native)")
    p.add_argument("--portable", action="store_true", help="no -march flag: runs on any CPU of the arch")
    p.add_argument("--name", default="model",
                   help="prefix of the generated C API symbols, and with --target c of the package's files "
                        "(default model)")
    p.add_argument("--target", choices=("native", "c", "cuda"), default="native",
                   help="native: a shared library for this machine (default); c: a freestanding C99 "
                        "source package (NAME.c, NAME.h, NAME_weights.c, NAME_demo.c, Makefile, "
                        "CMakeLists.txt, README.md) "
                        "that allocates nothing, for microcontrollers and other targets; cuda: the "
                        "CUDAExecutionProvider's build, made by nvcc without a GPU, that a session with "
                        "that provider loads without compiling")
    p.add_argument("--cuda-arch", metavar="ARCHS",
                   help="with --target cuda: the GPU architectures to build machine code for, comma-separated "
                        "(default: this machine's GPU, else sm_80,sm_90); the newest one's PTX is included")
    p.add_argument("--weights", choices=("c", "bin"), default="c",
                   help="with --target c: the weights as constant arrays in NAME_weights.c (default), or as "
                        "NAME_weights.bin (little-endian) that the program loads and passes to NAME_init")
    p.add_argument("--requantize", choices=("float", "fixed-point"),
                   help="how int8 Conv, MatMul and Gemm kernels requantize their int32 sums: float "
                        "(onnxruntime's float32 product rounded half to even, default) or fixed-point "
                        "(TFLite's and CMSIS-NN's 31-bit multiplier and shift; the default with --cmsis-nn)")
    p.add_argument("--cmsis-nn", action="store_true",
                   help="with --target c: int8 Conv, depthwise Conv, MatMul and Gemm nodes CMSIS-NN can "
                        "compute call its kernels (the build links CMSIS-NN: the Makefile's CMSIS_NN names its folder); "
                        "requantization is then fixed-point")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: float32 MatMul, Gemm and Conv multiply in bfloat16 with float32 sums (about "
                        "3 significant digits per product; needs a CPU with AVX512-BF16, refused elsewhere); "
                        "fp32: float32 throughout (default). Same as the session config entry "
                        "session.onnxc.precision")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                   help="fix a symbolic input dim (repeatable); with --target c every dim must be fixed "
                        "or bounded: NAME<=MAX builds for every size up to MAX, the arena sized for MAX")
    p.add_argument("--threads", type=int, default=0,
                   help="intra-op threads the code is built for (default 0: one per usable core, as an "
                        "InferenceSession's default intra_op_num_threads)")
    p.add_argument("--force", action="store_true",
                   help="write into -o even when it holds another kind of output or other files")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    shown.add_argument("--progress", action="store_true",
                       help="show the stages on stderr even when it is not a terminal (one line each)")
    p.set_defaults(func=_compile)

    p = sub.add_parser(
        "run", parents=[logs], formatter_class=fmt, help="run a model or artifact on given or random inputs",
        description="Run a .onnx model (compiled through the cache) or an artifact folder once, on "
                    "inputs from files or random ones (strings: random words; sequences: two random "
                    "tensors; optional inputs: left out). Prints each input's origin and each "
                    "output's type, shape and summary (min/max/mean, true count or first strings).",
        epilog=_examples("onnxc run build/model",
                         "onnxc run model.onnx --input x=x.npy --input mask=mask.pb",
                         "onnxc run model.onnx --input feeds.npz --output-dir out",
                         "onnxc run model.onnx --dim batch=8 --seed 1") +
        "\n\n--output-dir writes a tensor as NAME.npy (strings as unicode arrays; bfloat16, float8\n"
        "and 4-/2-bit types widened to float32/int8/uint8), a sequence as NAME.npz (keys 0, 1, ...)\n"
        "and a sequence of maps as NAME.json; a None optional output is skipped. File names keep\n"
        "letters, digits, '.', '_' and '-' of the output name; anything else becomes '_'.")
    p.add_argument("model", help="a .onnx model or an artifact folder")
    _add_input_options(p)
    p.add_argument("--output-dir", metavar="DIR", help="save each output into DIR (created)")
    p.set_defaults(func=_run)

    p = sub.add_parser(
        "verify", parents=[logs], formatter_class=fmt, help="compare onnxc with onnxruntime on the same inputs",
        description="Run a model with onnxc and with onnxruntime on the same inputs (given or random) "
                    "and compare every output: floats pass within atol + rtol * |expected|, with "
                    "NaNs and infinities where onnxruntime has them; integers, bools and strings "
                    "must be equal; sequences compare item by item; dtypes and shapes must match. "
                    "Prints the max abs and max rel error (over nonzero expected elements) per "
                    "output. Exit status 0 when every output passes, 1 otherwise, 3 when "
                    "onnxruntime is not installed.",
        epilog=_examples("onnxc verify model.onnx",
                         "onnxc verify model.onnx --rtol 1e-3 --atol 1e-4 --dim batch=4",
                         "onnxc verify model.onnx --artifact build/model --input feeds.npz"))
    p.add_argument("model", help="the .onnx model (onnxruntime runs it)")
    p.add_argument("--artifact", metavar="DIR",
                   help="run this compiled artifact folder for onnxc instead of compiling the model")
    _add_input_options(p)
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default 1e-4)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")
    p.set_defaults(func=_verify)

    p = sub.add_parser(
        "bench", parents=[logs], formatter_class=fmt, help="time onnxc against onnxruntime",
        description="Time a model's runs with onnxc and, when it is installed, onnxruntime, on the "
                    "same inputs: warmup runs, then --runs timed runs of each; prints min, median "
                    "and p90 milliseconds and the ratio onnxc/onnxruntime (below 1: onnxc is "
                    "faster). Times are of the Python run() call, as an application sees them. "
                    "Both runtimes get intra_op_num_threads=--threads (default 1; 0: one thread "
                    "per core, each runtime's default). Without a model, `onnxc bench` runs the "
                    "benchmark suite (`onnxc bench --smoke`, `--models`, `--threads 1,2`; "
                    "`python -m onnxc.benchmarks --help` lists its options), and `onnxc bench --corpus` "
                    "the real-world corpus of third-party and exported models (benchmarks/README.md).",
        epilog=_examples("onnxc bench model.onnx",
                         "onnxc bench model.onnx --runs 200 --warmup 20 --dim batch=16",
                         "onnxc bench model.onnx --threads 0",
                         "onnxc bench build/model --no-reference"))
    p.add_argument("model", help="a .onnx model (or an artifact folder: then onnxc alone is timed)")
    p.add_argument("--artifact", metavar="DIR",
                   help="time this compiled artifact folder for onnxc instead of compiling the model")
    _add_input_options(p)
    p.add_argument("--runs", type=int, default=50, help="timed runs per runtime (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra_op_num_threads of both runtimes (default 1; 0: one per core)")
    p.add_argument("--no-reference", action="store_true", help="time onnxc alone")
    p.set_defaults(func=_bench)

    p = sub.add_parser(
        "profile", parents=[logs], formatter_class=fmt, help="profile a model's nodes (Chrome trace and summary)",
        description="Compile a model with profiling (every node call timed inside the generated "
                    "code), run it --runs times on given or random inputs, write onnxruntime's "
                    "Chrome-trace JSON (open it in chrome://tracing or Perfetto) and print the nodes "
                    "that took the most time and the time per operator.",
        epilog=_examples("onnxc profile model.onnx", "onnxc profile model.onnx --runs 20 --top 5 --dim batch=8"))
    p.add_argument("model", help="the .onnx model")
    _add_input_options(p)
    p.add_argument("--runs", type=int, default=10, help="profiled runs (default 10)")
    p.add_argument("--top", type=int, default=10, help="nodes to list (default 10)")
    p.add_argument("--prefix", default="onnxc_profile", help="trace file name prefix (default onnxc_profile)")
    p.set_defaults(func=_profile)

    p = sub.add_parser(
        "info", parents=[logs], formatter_class=fmt,
        help="a model's operators (and which are unsupported) or an artifact's manifest",
        description="On a .onnx model: its opsets, inputs, outputs and every operator it uses "
                    "(control-flow bodies too) with node counts, unsupported ones marked; exit "
                    "status 2 when any is unsupported, 1 when onnx.checker finds the model invalid "
                    "(other than for operators it does not know). On an artifact folder: what it was "
                    "built with (threads, optimization level, disabled passes, fixed dims, SIMD target), "
                    "its inputs and outputs; --json prints its manifest's fields as JSON.",
        epilog=_examples("onnxc info model.onnx", "onnxc info build/model"))
    p.add_argument("artifact", help="a .onnx model or an artifact folder")
    p.add_argument("--json", action="store_true", help="an artifact's manifest as JSON")
    p.set_defaults(func=_info)

    p = sub.add_parser(
        "cache", parents=[logs], formatter_class=fmt, help="list, describe or prune the compile cache",
        description="Every command and InferenceSession compile through one cache (ONNXC_CACHE_DIR, else "
                    "~/.cache/onnxc): one artifact per model, options, onnxc version and compiler. "
                    "list shows them with when each was last used; info KEY what one was built with; "
                    "clear removes them all, or with --older-than DAYS those not used for that long.",
        epilog=_examples("onnxc cache list", "onnxc cache info 3f2a", "onnxc cache clear --older-than 30"))
    p.add_argument("action", choices=("list", "info", "clear"), help="list, info or clear")
    p.add_argument("key", nargs="?", help="info: the artifact's key (or its start)")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="clear: only artifacts unused for DAYS days")
    p.set_defaults(func=_cache)

    p = sub.add_parser(
        "ops", parents=[logs], formatter_class=fmt, help="list supported operators",
        description="Every operator onnxc compiles, as DOMAIN::OP with the opset range it supports "
                    "(an open end: up to the newest opset).",
        epilog=_examples("onnxc ops", "onnxc ops | grep ::Resize"))
    p.set_defaults(func=_ops)

    p = sub.add_parser(
        "completion", formatter_class=fmt, help="print a shell completion script (bash, zsh)",
        description="Print a script that completes onnxc's commands, options, option values and "
                    "file names in bash or zsh. Load it in the shell's start-up file.",
        epilog=_examples('eval "$(onnxc completion bash)"   # in ~/.bashrc',
                         'eval "$(onnxc completion zsh)"    # in ~/.zshrc, after compinit',
                         "onnxc completion bash > /etc/bash_completion.d/onnxc"))
    p.add_argument("shell", choices=SHELLS, help="the shell: bash or zsh")
    p.set_defaults(func=_completion, verbose=0, log_level=None)
    return parser


def _names_a_model(args: Sequence[str]) -> bool:
    """Whether `onnxc bench` was given a model or artifact (else it runs the benchmark suite)."""
    return any(a in ("-h", "--help") or (not a.startswith("-") and (os.path.exists(a) or a.endswith(".onnx")))
               for a in args)


def _set_up_logging(level: Optional[str]) -> None:
    """onnxc's log records (the ``onnxc`` logger and its sessions') to stderr at ``level``."""
    if level is None:
        return
    import logging
    logger = logging.getLogger("onnxc")
    logger.setLevel(level.upper())
    for handler in logger.handlers:
        if getattr(handler, "onnxc_cli", False):   # main() called again in this process
            handler.setStream(sys.stderr)
            return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("onnxc: %(levelname)s: %(name)s: %(message)s"))
    handler.onnxc_cli = True   # type: ignore[attr-defined]
    logger.addHandler(handler)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .compiler.errors import OnnxcError, UnsupportedError
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench" and not _names_a_model(argv[1:]):
        from .benchmarks.cli import main as suite_main   # `onnxc bench` alone: the benchmark suite
        return suite_main(argv[1:], prog="onnxc bench")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else EXIT_ERROR
    args.command_line = " ".join(["onnxc"] + [shlex.quote(a) for a in argv])
    args.log_level = args.log_level or ("debug" if args.verbose >= 2 else "info" if args.verbose else None)
    _set_up_logging(args.log_level)
    try:
        return args.func(args)
    except (OnnxcError, CliError, OSError) as e:
        stage = getattr(e, "stage", None)  # set by compile: the stage that failed
        where = f" (during {stage})" if stage else ""
        print(f"onnxc: error: {e}{where}", file=sys.stderr)
        return EXIT_UNSUPPORTED if isinstance(e, UnsupportedError) else EXIT_ERROR
    except KeyboardInterrupt:
        print("onnxc: interrupted", file=sys.stderr)
        return 130
