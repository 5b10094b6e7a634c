"""docs/onnxruntime-api.md is what ``python -m onnxc._api_diff`` writes from the installed
onnxruntime and onnxc, and every name onnxruntime has is in onnxc or explained."""
from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

import onnxc
from onnxc import _api_diff
from tools import require_module

ort = require_module("onnxruntime")
DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "onnxruntime-api.md")


def test_every_onnxruntime_name_is_in_onnxc_or_explained():
    assert _api_diff.problems(_api_diff.diff(ort, onnxc)) == []


def test_the_page_is_up_to_date():
    rows = _api_diff.diff(ort, onnxc)
    with open(DOC, encoding="utf-8") as f:
        assert f.read() == _api_diff.render(rows, ort, onnxc), \
            "run: python -m onnxc._api_diff --write docs/onnxruntime-api.md"


def test_check_mode_exits_1_on_a_stale_page(tmp_path):
    stale = tmp_path / "api.md"
    stale.write_text("# an old page\n", encoding="utf-8")
    run = [sys.executable, "-m", "onnxc._api_diff", "--check"]
    assert subprocess.run(run + [DOC], capture_output=True, timeout=120).returncode == 0
    proc = subprocess.run(run + [str(stale)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "out of date" in proc.stderr


def test_a_name_neither_implemented_nor_explained_is_reported():
    """A name onnxruntime gains, or a name onnxc drops, is found; so is a note about a name
    onnxruntime no longer has."""
    newer = types.ModuleType("onnxruntime")
    vars(newer).update({n: getattr(ort, n) for n in dir(ort) if not n.startswith("_")})
    newer.brand_new_function = lambda: None
    newer.__version__ = ort.__version__
    assert _api_diff.problems(_api_diff.diff(newer, onnxc)) == \
        ["module: brand_new_function is not in onnxc and has no entry in NOTES"]
    del newer.SparseTensor
    assert "NOTES has module: SparseTensor, which onnxruntime does not have" in \
        _api_diff.problems(_api_diff.diff(newer, onnxc))


def test_implemented_names_are_done_and_missing_ones_say_why():
    rows = {(r.section, r.name): r for r in _api_diff.diff(ort, onnxc)}
    assert rows[("module", "get_device")].in_onnxc and rows[("module", "get_device")].status.startswith("done")
    assert rows[("InferenceSession", "run_with_iobinding")].status == "done"
    sparse = rows[("module", "SparseTensor")]
    assert not sparse.in_onnxc and sparse.status.startswith("not provided:")
    assert rows[("NodeArg", "shape")].in_onnxc and rows[("SessionOptions", "add_provider")].status.startswith("not")
