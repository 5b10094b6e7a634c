"""Inputs, outputs and comparisons for the ``onnxc`` command line.

Feeds come from ``.npy``, ``.npz`` and ``.pb`` (TensorProto, SequenceProto,
OptionalProto) files or are random; outputs are summarized, saved as ``.npy``
files and compared with a reference runtime's.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np


class CliError(Exception):
    """A problem with the command's arguments or files: printed, exit status 1."""


@dataclass
class InputSpec:
    """One model input as the artifact's manifest describes it."""
    name: str
    dtype: str                   # element type name: "float", "int64", "string", ...
    kind: str                    # "tensor", "sequence", "optional", "optional_sequence"
    shape: Optional[list]        # ints, symbol names (str) or None per dim; None: rank unknown

    @property
    def type_text(self) -> str:
        text = f"tensor({self.dtype})"
        return {"sequence": f"seq({text})", "optional": f"optional({text})",
                "optional_sequence": f"optional(seq({text}))"}.get(self.kind, text)


def input_specs(manifest: dict) -> list[InputSpec]:
    return [InputSpec(i["name"], i["dtype"], i.get("kind", "tensor"),
                      None if i.get("shape") is None else list(i["shape"])) for i in manifest["inputs"]]


# --- reading inputs -------------------------------------------------------------------------

def parse_dims(items: Optional[Sequence[str]], bounds: Optional[dict[str, int]] = None) -> dict[str, int]:
    """NAME=SIZE items; with ``bounds``, NAME<=MAX items go there."""
    dims: dict[str, int] = {}
    for item in items or []:
        bounded = bounds is not None and "<=" in item
        name, sep, value = item.partition("<=" if bounded else "=")
        least, into = (1, bounds) if bounded else (0, dims)
        try:
            if not sep or not name or name in dims or (bounds is not None and name in bounds):
                raise ValueError
            into[name] = int(value)
            if into[name] < least:
                raise ValueError
        except ValueError:
            form = "NAME<=MAX with a bound >= 1" if bounded else "NAME=SIZE with a size >= 0"
            raise CliError(f"--dim {item!r}: expected {form}, once per name") from None
    return dims


def _np_dtype(type_name: str) -> np.dtype:
    from .compiler import dtypes as dt
    return dt.by_name(type_name).np


def _fit_dtype(array: np.ndarray, spec: InputSpec, origin: str, notes: list[str]) -> np.ndarray:
    """Files hold numpy's own types: reinterpret or convert them for ml_dtypes inputs (bfloat16,
    float8, int4 ...), which numpy files cannot name. Other mismatches are left to the session
    to report."""
    want = _np_dtype(spec.dtype)
    if array.dtype == want or spec.dtype == "string" or want.type.__module__.startswith("numpy"):
        return array
    if array.dtype.kind == "V" and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    if array.dtype.kind in "fiub":
        notes.append(f"{spec.name}: {origin} holds {array.dtype}, converted to {spec.dtype}")
        return array.astype(want)
    return array


def _np_load(path: str, what: str, read):
    """``read(np.load(path))``, with the CLI's messages for pickled arrays and unreadable files."""
    try:
        return read(np.load(path, allow_pickle=False))
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise CliError(f"{path}: object arrays are not read (they need pickle); save strings as a "
                           "unicode array, e.g. np.save(path, np.array(values, dtype=str))") from None
        raise CliError(f"{path}: not a {what} file: {e}") from None
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None


def _load_npy(path: str) -> np.ndarray:
    return _np_load(path, ".npy", lambda array: array)


def _load_pb(path: str, spec: Optional[InputSpec]) -> tuple[str, Any]:
    """A serialized TensorProto (or SequenceProto / OptionalProto for such inputs): (its name, value)."""
    import onnx
    from onnx import numpy_helper
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None
    kind = spec.kind if spec is not None else "tensor"
    try:
        if kind == "tensor":
            proto = onnx.TensorProto()
            proto.ParseFromString(data)
            value: Any = numpy_helper.to_array(proto)
        elif kind == "sequence":
            proto = onnx.SequenceProto()
            proto.ParseFromString(data)
            value = numpy_helper.to_list(proto)
        else:
            proto = onnx.OptionalProto()
            proto.ParseFromString(data)
            value = numpy_helper.to_optional(proto)
    except Exception as e:
        what = {"tensor": "TensorProto", "sequence": "SequenceProto"}.get(kind, "OptionalProto")
        raise CliError(f"{path}: not a serialized {what}: {e}") from None
    return proto.name, value


def _load_npz(path: str) -> dict[str, np.ndarray]:
    def read(archive):
        with archive:
            return {key: archive[key] for key in archive.files}
    return _np_load(path, ".npz", read)


def read_inputs(items: Optional[Sequence[str]], specs: Sequence[InputSpec],
                notes: list[str]) -> dict[str, tuple[Any, str]]:
    """``--input`` items -> {input name: (value, where it came from)}.

    Items: ``NAME=FILE`` (``.npy`` or ``.pb``), ``FILE.npz`` (one array per input, keyed by
    name) or ``FILE.pb`` (a TensorProto named after its input)."""
    by_name = {s.name: s for s in specs}
    given: dict[str, tuple[Any, str]] = {}

    def add(name: str, value: Any, origin: str) -> None:
        spec = by_name.get(name)
        if spec is None:
            raise CliError(f"{origin}: the model has no input {name!r}; its inputs: "
                           + ", ".join(repr(s.name) for s in specs))
        if name in given:
            raise CliError(f"input {name!r} is given twice ({given[name][1]} and {origin})")
        if isinstance(value, np.ndarray):
            value = _fit_dtype(value, spec, origin, notes)
        elif isinstance(value, list):
            value = [_fit_dtype(np.asarray(v), spec, origin, notes) for v in value]
        given[name] = (value, origin)

    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = "", item
        elif not name:
            raise CliError(f"--input {item!r}: the name before '=' is empty")
        if not os.path.exists(path):
            raise CliError(f"--input {item!r}: file not found: {path}")
        ext = os.path.splitext(path)[1].lower()
        if ext == ".npz":
            if name:
                raise CliError(f"--input {item!r}: a .npz file names its inputs itself; give just the file")
            for key, value in _load_npz(path).items():
                add(key, value, f"{path}[{key}]")
        elif ext == ".pb":
            spec = by_name.get(name) if name else None
            if name and spec is None:
                raise CliError(f"{path}: the model has no input {name!r}; its inputs: "
                               + ", ".join(repr(s.name) for s in specs))
            pb_name, value = _load_pb(path, spec)
            if not name:
                name = pb_name or (specs[0].name if len(specs) == 1 else "")
                if not name:
                    raise CliError(f"--input {item!r}: the TensorProto has no name; give NAME={path}")
                if by_name.get(name) is not None and by_name[name].kind != "tensor":
                    raise CliError(f"--input {item!r}: {name!r} is {by_name[name].type_text}: give "
                                   f"{name}={path} with a serialized SequenceProto or OptionalProto")
            add(name, value, path)
        elif ext == ".npy":
            if not name:
                if len(specs) != 1:
                    raise CliError(f"--input {item!r}: give NAME={path} (the model has {len(specs)} inputs)")
                name = specs[0].name
            add(name, _load_npy(path), path)
        else:
            raise CliError(f"--input {item!r}: expected a .npy, .npz or .pb file")
    return given


# --- random inputs ---------------------------------------------------------------------------

_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
          "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango")


def _concrete_shape(spec: InputSpec, dims: dict[str, int], used: set[str]) -> list[int]:
    shape = []
    for d in spec.shape or []:
        if isinstance(d, int):
            shape.append(d)
        elif isinstance(d, str) and d in dims:
            used.add(d)
            shape.append(dims[d])
        else:
            shape.append(1)
    return shape


def random_tensor(rng: np.random.Generator, type_name: str, shape: Sequence[int]) -> np.ndarray:
    from .compiler import dtypes as dt
    dtype = dt.by_name(type_name)
    if dtype.kind == "string":
        return np.array(rng.choice(_WORDS, size=tuple(shape)), dtype=object).reshape(tuple(shape))
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype.kind == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    try:
        import ml_dtypes
        top = int(ml_dtypes.iinfo(dtype.np).max)
    except Exception:
        top = int(np.iinfo(dtype.np).max)
    return rng.integers(0, min(10, top + 1), shape).astype(dtype.np)


def build_feed(specs: Sequence[InputSpec], given: dict[str, tuple[Any, str]], dims: dict[str, int],
               seed: int, notes: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Every input: given, or random (symbolic dims from ``dims``, else 1; sequences get two
    random tensors; optional inputs are left out). Returns the feed and one line per input."""
    rng = np.random.default_rng(seed)
    feed: dict[str, Any] = {}
    lines: list[str] = []
    used: set[str] = set()
    for spec in specs:
        if spec.name in given:
            value, origin = given[spec.name]
            feed[spec.name] = value
            lines.append(f"{spec.name}: {describe(value)} from {origin}")
            continue
        if spec.kind.startswith("optional"):
            lines.append(f"{spec.name}: {spec.type_text} not given: left out (None)")
            continue
        if spec.kind == "sequence":
            if spec.shape is None:
                raise CliError(f"input {spec.name!r} is {spec.type_text} with elements of unknown rank: give it "
                               f"with --input {spec.name}=FILE.pb (a serialized SequenceProto)")
            shape = _concrete_shape(spec, dims, used)
            feed[spec.name] = [random_tensor(rng, spec.dtype, shape) for _ in range(2)]
            lines.append(f"{spec.name}: {describe(feed[spec.name])} random")
            continue
        shape = _concrete_shape(spec, dims, used)
        feed[spec.name] = random_tensor(rng, spec.dtype, shape)
        symbolic = [d for d in spec.shape or [] if not isinstance(d, int)]
        extra = f" (dims {', '.join(str(d) for d in symbolic)} default to 1; set with --dim)" \
            if any(not (isinstance(d, str) and d in dims) for d in symbolic) else ""
        lines.append(f"{spec.name}: {describe(feed[spec.name])} random{extra}")
    unused = sorted(set(dims) - used)
    if unused:
        notes.append("--dim " + ", ".join(unused) + ": no random input has such a dim")
    return feed, lines


# --- describing and saving outputs ---------------------------------------------------------------

def _type_name(array: np.ndarray) -> str:
    if array.dtype.kind in "OUS":
        return "string"
    try:
        from .compiler import dtypes as dt
        return dt.from_numpy(array.dtype).name
    except Exception:
        return str(array.dtype)


def describe(value: Any) -> str:
    """A short type and shape: ``float[2, 3]``, ``seq(2 x int64[4])``, ``None``."""
    if value is None:
        return "None"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return f"seq({len(value)} maps)"
        shapes = {f"{_type_name(np.asarray(v))}{list(np.shape(v))}" for v in value}
        inner = shapes.pop() if len(shapes) == 1 else "mixed shapes"
        return f"seq({len(value)} x {inner})" if value else "seq(empty)"
    array = np.asarray(value)
    return f"{_type_name(array)}{list(array.shape)}"


def summary(value: Any) -> str:
    """Statistics worth a glance: min/max/mean, true count, first strings, sequence items."""
    if value is None:
        return ""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return f"keys {list(value[0])[:5]}"
        return "; ".join(f"[{i}] {describe(v)} {summary(v)}".rstrip() for i, v in enumerate(value[:4])) + \
            ("; ..." if len(value) > 4 else "")
    array = np.asarray(value)
    if array.size == 0:
        return "empty"
    if array.dtype.kind in "OUS":
        first = [str(x) for x in array.reshape(-1)[:3]]
        return "values " + ", ".join(repr(x) for x in first) + (" ..." if array.size > 3 else "")
    if array.dtype.kind == "b":
        return f"true {int(np.count_nonzero(array))} of {array.size}"
    wide = array.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    text = (f"min {finite.min():.6g} max {finite.max():.6g} mean {finite.mean():.6g}" if finite.size
            else "no finite values")
    bad = wide.size - finite.size
    if bad:
        text += f" ({int(np.isnan(wide).sum())} nan, {int(np.isinf(wide).sum())} inf)"
    return text


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_name(name: str, taken: set[str]) -> str:
    """An output name as a file name stem: no separators or odd characters, no leading dot,
    at most 100 characters, distinct (case-insensitively) from the names in ``taken``."""
    stem = _UNSAFE.sub("_", name).lstrip(".") or "output"
    stem = stem[:100]
    candidate, n = stem, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{stem}_{n}"
    taken.add(candidate.lower())
    return candidate


def _storable(array: np.ndarray) -> tuple[np.ndarray, str]:
    """A numpy-native array np.load reads without pickle, and a note when converted."""
    array = np.asarray(array)
    if array.dtype.kind in "OS":
        return np.array([str(x) if not isinstance(x, bytes) else x.decode("utf-8", "replace")
                         for x in array.reshape(-1)], dtype=str).reshape(array.shape), ""
    if array.dtype.type.__module__.startswith("numpy"):
        return array, ""
    name = _type_name(array)
    target = np.float32 if name.startswith(("float", "bfloat")) else (np.int8 if name.startswith("int") else np.uint8)
    return array.astype(target), f" (numpy has no {name}: saved as {np.dtype(target)})"


def ensure_dir(folder: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create {folder}: {e.strerror or e}") from None


def save_outputs(folder: str, names: Sequence[str], values: Sequence[Any]) -> list[str]:
    """Writes each output into ``folder``: a tensor as ``<name>.npy``, a sequence as ``<name>.npz``
    (keys ``0``, ``1`` ...), a sequence of maps as ``<name>.json``; a None optional is skipped."""
    ensure_dir(folder)
    taken: set[str] = set()
    lines = []
    for name, value in zip(names, values):
        stem = safe_file_name(name, taken)
        try:
            if value is None:
                lines.append(f"{name}: None, nothing saved")
                continue
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                path = os.path.join(folder, stem + ".json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump([{str(k): float(v) for k, v in m.items()} for m in value], f)
                lines.append(f"{name} -> {path}")
            elif isinstance(value, list):
                path = os.path.join(folder, stem + ".npz")
                items = [_storable(v) for v in value]
                np.savez(path, **{str(i): a for i, (a, _) in enumerate(items)})
                lines.append(f"{name} -> {path}{items[0][1] if items else ''}")
            else:
                path = os.path.join(folder, stem + ".npy")
                array, note = _storable(value)
                np.save(path, array, allow_pickle=False)
                lines.append(f"{name} -> {path}{note}")
        except OSError as e:
            raise CliError(f"cannot write output {name!r} into {folder}: {e.strerror or e}") from None
    return lines


# --- comparing with a reference -------------------------------------------------------------------

@dataclass
class Comparison:
    ok: bool
    max_abs: Optional[float] = None    # None: not applicable (strings, mismatched shapes)
    max_rel: Optional[float] = None    # over elements whose expected value is not zero
    note: str = ""


def _merge(parts: Sequence[Comparison], note: str = "") -> Comparison:
    def worst(values):
        values = [v for v in values if v is not None]
        return max(values) if values else None
    notes = [p.note for p in parts if p.note]
    return Comparison(all(p.ok for p in parts), worst(p.max_abs for p in parts), worst(p.max_rel for p in parts),
                      "; ".join(([note] if note else []) + notes[:2]))


def compare(actual: Any, expected: Any, rtol: float, atol: float) -> Comparison:
    """``actual`` against the reference's ``expected``: floats within ``atol + rtol * |expected|``
    (NaN where NaN, same infinities), integers, bools and strings exactly; sequences item by
    item, maps key by key; dtypes and shapes must match."""
    if expected is None or actual is None:
        if expected is None and actual is None:
            return Comparison(True, note="both None")
        return Comparison(False, note=f"{describe(actual)} vs reference {describe(expected)}")
    if isinstance(expected, dict) or isinstance(actual, dict):
        if not (isinstance(expected, dict) and isinstance(actual, dict)):
            return Comparison(False, note="a map vs a non-map")
        if sorted(map(str, actual)) != sorted(map(str, expected)):
            return Comparison(False, note="map keys differ")
        return _merge([compare(np.asarray(actual[k]), np.asarray(expected[k]), rtol, atol) for k in expected])
    if isinstance(expected, (list, tuple)) or isinstance(actual, (list, tuple)):
        if not (isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple))):
            return Comparison(False, note=f"{describe(actual)} vs reference {describe(expected)}")
        if len(actual) != len(expected):
            return Comparison(False, note=f"{len(actual)} items vs reference {len(expected)}")
        if not expected:
            return Comparison(True, note="empty sequences")
        parts = [compare(a, e, rtol, atol) for a, e in zip(actual, expected)]
        bad = [i for i, p in enumerate(parts) if not p.ok]
        return _merge(parts, f"items {bad[:5]} differ" if bad else "")
    a, e = np.asarray(actual), np.asarray(expected)
    a_str, e_str = a.dtype.kind in "OUS", e.dtype.kind in "OUS"
    if a_str or e_str:
        if not (a_str and e_str):
            return Comparison(False, note=f"dtype {_type_name(a)} vs reference {_type_name(e)}")
        if a.shape != e.shape:
            return Comparison(False, note=f"shape {list(a.shape)} vs reference {list(e.shape)}")
        differ = int(np.count_nonzero(np.asarray(
            [str(x) != str(y) for x, y in zip(a.reshape(-1), e.reshape(-1))], dtype=bool)))
        return Comparison(differ == 0, note=f"{differ} of {e.size} strings differ" if differ else "")
    notes = []
    if a.dtype != e.dtype:
        notes.append(f"dtype {_type_name(a)} vs reference {_type_name(e)}")
    if a.shape != e.shape:
        notes.append(f"shape {list(a.shape)} vs reference {list(e.shape)}")
        return Comparison(False, note="; ".join(notes))
    exact = e.dtype.kind in "biu" and a.dtype.kind in "biu"
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare_numbers(a, e, exact, notes, rtol, atol)


def _compare_numbers(a: np.ndarray, e: np.ndarray, exact: bool, notes: list[str], rtol: float,
                     atol: float) -> Comparison:
    af, ef = a.astype(np.float64), e.astype(np.float64)
    if exact:  # compared as integers: float64 would merge int64 values above 2**53
        good = same = np.asarray(a == e)
    else:
        same = (af == ef) | (np.isnan(af) & np.isnan(ef))
    diff = np.where(same, 0.0, np.abs(af - ef))
    diff = np.where(np.isnan(diff), np.inf, diff)   # NaN against a number
    if not exact:
        good = same | (np.isfinite(af) & np.isfinite(ef) & (diff <= atol + rtol * np.abs(ef)))
    max_abs = float(diff.max()) if diff.size else 0.0
    nonzero = ef != 0
    rel = diff[nonzero] / np.abs(ef[nonzero])
    max_rel = float(rel.max()) if rel.size else 0.0
    within = bool(good.all())
    if not within:
        notes.append(f"{int(np.count_nonzero(~good))} of {e.size} elements "
                     f"{'differ' if exact else 'out of tolerance'}")
    return Comparison(within and a.dtype == e.dtype, max_abs, max_rel, "; ".join(notes))


def format_error(value: Optional[float]) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"
