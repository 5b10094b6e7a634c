"""The ONNX node conformance cases of the installed onnx package, run through onnxc.

Each case's model is compiled to C, built, loaded and run on the case's inputs;
outputs are compared with the case's expected outputs at onnx's tolerances.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import warnings
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

EXPECTED_FAILURES = os.path.join(os.path.dirname(__file__), "expected_failures.txt")


@functools.lru_cache(maxsize=1)
def all_cases() -> dict[str, Any]:
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None)}   # (None: every op; onnx < 1.21 requires the argument)


def expected_failures() -> dict[str, str]:
    """test name -> reason, from expected_failures.txt."""
    return read_expected_failures(EXPECTED_FAILURES)


def read_expected_failures(path: str) -> dict[str, str]:
    """case name -> reason, from a file of ``name: reason`` lines (# starts a comment line).

    ``name [package>=version]: reason`` lists a case only where the installed package meets
    the condition (``>=`` or ``<``): a case whose expected values come from a package's
    behaviour, which changed in that version."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(":")
            name, _, condition = name.partition("[")
            if condition and not installed_version_meets(condition.rstrip("] ")):
                continue
            out[name.strip()] = reason.strip()
    return out


def installed_version_meets(condition: str) -> bool:
    """``package>=1.2`` or ``package<1.2`` against the installed distribution's version."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(>=|<)\s*([0-9][0-9.]*)\s*", condition)
    if match is None:
        raise ValueError(f"expected failure condition {condition!r}: expected package>=version or package<version")
    package, op, version = match.groups()
    installed = _version_tuple(importlib.metadata.version(package))
    wanted = _version_tuple(version)
    return installed >= wanted if op == ">=" else installed < wanted


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


# Listed because the expected outputs are random draws: compiled code matches them by chance at
# times (a few Bernoulli draws of a small output), which says nothing about a fix.
CHANCE = "draws from numpy's global random state"


def run_listed_case(name: str, case: Any, workdir: str, reason: str | None, listed_in: str) -> None:
    """Runs a case against its expected-failures entry: a listed case must fail (it xfails with
    its reason), and one that passes while listed fails the test, so the list only shrinks
    (except a case listed for random draws, which can match by chance)."""
    import pytest
    try:
        run_case(case, workdir)
    except Exception:
        if reason is not None:
            pytest.xfail(reason)
        raise
    if reason is not None and CHANCE not in reason:
        pytest.fail(f"{name} passes now but is listed in {listed_in} ({reason}): remove it", pytrace=False)


class Mismatch(AssertionError):
    pass


def _compare(name: str, expected: Any, actual: Any, rtol: float, atol: float) -> None:
    if expected is None or isinstance(expected, list):  # an empty optional, a sequence
        if expected is None or actual is None:
            if not (expected is None and actual is None):
                raise Mismatch(f"{name}: {'an empty optional' if expected is None else 'a value'} expected, "
                               f"got {'an empty optional' if actual is None else 'a value'}")
            return
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise Mismatch(f"{name}: a sequence of {len(expected)} expected, got {type(actual).__name__} "
                           f"{len(actual) if isinstance(actual, list) else ''}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(f"{name}[{i}]", _as_array(e), a, rtol, atol)
        return
    if isinstance(expected, np.generic):
        expected = np.asarray(expected)
    if not isinstance(expected, np.ndarray):
        raise Mismatch(f"{name}: non-tensor expected output ({type(expected).__name__})")
    if actual.dtype != expected.dtype:
        raise Mismatch(f"{name}: dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise Mismatch(f"{name}: shape {actual.shape}, expected {expected.shape}")
    if expected.dtype == object or expected.dtype.kind in "SU":
        if not np.array_equal(actual, expected):
            raise Mismatch(f"{name}: values differ")
        return
    if expected.dtype.kind in "biu" and expected.dtype.kind != "f":
        if not np.array_equal(actual, expected):
            raise Mismatch(f"{name}: values differ: {np.count_nonzero(actual != expected)} elements")
        return
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    try:
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as err:
        raise Mismatch(f"{name}: {str(err).strip().splitlines()[0:6]}") from None


def _as_array(value: Any) -> Any:
    """Cases give some tensors as TensorProto (e.g. float8 data): convert those."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value


def run_case(case: Any, workdir: str, opt: str = "-O3", **compile_options: Any) -> None:
    """Compile, load and run one case; raises on any failure or mismatch."""
    import onnxc
    from onnxc.driver import CompileOptions
    options = CompileOptions(opt=opt, check_ir=True, **compile_options)
    onnxc.compile_model(case.model, workdir, options, command=f"onnxc compile {case.name}")
    check_session(case, onnxc.InferenceSession(workdir))


def run_case_onnxruntime(case: Any) -> None:
    """The same case on onnxruntime's CPU provider, by the same comparison (the survey's
    ``--onnxruntime``: how many cases the reference itself passes)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 4
    check_session(case, ort.InferenceSession(case.model.SerializeToString(), so, providers=["CPUExecutionProvider"]))


def check_session(case: Any, sess: Any) -> None:
    """Run every data set of ``case`` through ``sess``; raises on any failure or mismatch."""
    import onnxc
    initializers = {i.name for i in case.model.graph.initializer}
    input_names = [i.name for i in case.model.graph.input if i.name not in initializers]
    output_names = [o.name for o in case.model.graph.output]
    for inputs, outputs in case.data_sets:
        if len(inputs) != len(input_names):
            raise Mismatch(f"case feeds {len(inputs)} inputs, model declares {len(input_names)}")
        feed = {}
        outputs = [_as_array(o) for o in outputs]
        for name, value in zip(input_names, inputs):
            value = _as_array(value)
            if isinstance(value, np.generic):
                value = np.asarray(value)
            if isinstance(value, list):  # a sequence
                value = [np.asarray(_as_array(v)) for v in value]
            elif value is not None and not isinstance(value, np.ndarray):
                raise onnxc.UnsupportedError(f"input {name!r} is a {type(value).__name__}, not a tensor")
            feed[name] = value
        results = sess.run(None, feed)
        for name, expected, actual in zip(output_names, outputs, results):
            _compare(name, expected, actual, case.rtol, case.atol)
